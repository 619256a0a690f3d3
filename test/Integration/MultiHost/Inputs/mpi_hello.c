/* Where each MPI process runs, and whether the processes can talk: prints, per rank, its
 * host's name (the namespace's hostname) and the addresses of its network interfaces other
 * than loopback (which tell the network namespace apart), then the results of two
 * all-reduces: a small one of rank + 1, and one of 1 MiB that TCP carries in many segments. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, length = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  MPI_Get_processor_name(name, &length);

  char addrs[256] = "";
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) == 0) {
    for (struct ifaddrs *it = list; it; it = it->ifa_next) {
      if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || strcmp(it->ifa_name, "lo") == 0)
        continue;
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &((struct sockaddr_in *)it->ifa_addr)->sin_addr, text, sizeof text);
      if (addrs[0])
        strncat(addrs, ",", sizeof addrs - strlen(addrs) - 1);
      strncat(addrs, text, sizeof addrs - strlen(addrs) - 1);
    }
    freeifaddrs(list);
  }

  int one = rank + 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

  enum { N = 1 << 18 };
  int *big = malloc(N * sizeof(int)), *total = malloc(N * sizeof(int));
  for (int i = 0; i < N; ++i)
    big[i] = i * (rank + 1);
  MPI_Allreduce(big, total, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  /* Every element must be i * (1 + 2 + ... + size). */
  long bad = 0;
  int factor = size * (size + 1) / 2;
  for (int i = 0; i < N; ++i)
    bad += total[i] != i * factor;

  /* One line per rank; lines from different hosts reach mpirun in any order. */
  printf("rank %d of %d on %s at %s: sum %d, 1 MiB all-reduce %s\n", rank, size, name,
         addrs[0] ? addrs : "(no address)", sum, bad ? "WRONG" : "right");
  fflush(stdout);
  free(big);
  free(total);
  MPI_Finalize();
  return bad != 0;
}

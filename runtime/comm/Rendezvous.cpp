//===- Rendezvous.cpp - One blob from rank 0 to every process, over TCP ---===//
//
// The wire: a rank connects to rank 0 and sends its hello (magic, version, rank, world size:
// four big-endian 32-bit words); rank 0 answers each with a status word (0: the blob follows,
// 1: a message saying why the exchange failed), a length word and that many bytes. Every
// socket is non-blocking and every wait a poll up to the deadline, so a silent peer costs time,
// never a hang.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Rendezvous.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace tessel::rt::rendezvous {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x54535256; // "TSRV"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kOk = 0, kFailed = 1;
/// The longest blob or message either side accepts: far above NCCL's 128 bytes.
constexpr uint32_t kMaxPayload = 1 << 20;

/// Reads an unsigned decimal variable; false (with the reason) if it is unset or not a number.
bool readNumber(const char *name, uint64_t max, uint64_t &out, std::string &error) {
  const char *text = std::getenv(name);
  if (!text || !*text) {
    error = std::string(name) + " is not set";
    return false;
  }
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || *end || text[0] == '-' || v > max) {
    error = std::string(name) + "='" + text + "' is not a number from 0 to " + std::to_string(max);
    return false;
  }
  out = v;
  return true;
}

int remainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

std::string errnoText(int e) { return std::strerror(e); }

/// A socket closed with the object.
struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int fd) : fd(fd) {}
  Socket(Socket &&o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket &operator=(Socket &&o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

bool nonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

/// Waits until `fd` is ready for `events`; false on timeout (errno ETIMEDOUT) or a poll error.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remainingMs(deadline));
    if (n > 0)
      return true;
    if (n == 0) {
      errno = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR)
      return false;
  }
}

bool sendAll(int fd, const void *data, size_t bytes, Clock::time_point deadline) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!waitFor(fd, POLLOUT, deadline))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

/// Reads exactly `bytes`; false on timeout, error, or the peer closing first (errno 0).
bool recvAll(int fd, void *data, size_t bytes, Clock::time_point deadline) {
  char *p = static_cast<char *>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      errno = 0;
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!waitFor(fd, POLLIN, deadline))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

bool sendWords(int fd, std::initializer_list<uint32_t> words, Clock::time_point deadline) {
  std::vector<uint32_t> wire;
  for (uint32_t w : words)
    wire.push_back(htonl(w));
  return sendAll(fd, wire.data(), wire.size() * 4, deadline);
}

bool recvWords(int fd, uint32_t *words, size_t count, Clock::time_point deadline) {
  if (!recvAll(fd, words, count * 4, deadline))
    return false;
  for (size_t i = 0; i < count; ++i)
    words[i] = ntohl(words[i]);
  return true;
}

/// Rank 0's answer to one rank: the blob, or why there is none.
bool reply(int fd, uint32_t status, const void *payload, size_t bytes) {
  // A rank that stopped listening is not waited for long: it has its own deadline.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  return sendWords(fd, {status, static_cast<uint32_t>(bytes)}, deadline) &&
         sendAll(fd, payload, bytes, deadline);
}

std::string endpoint(const Place &place) {
  const bool v6 = place.masterAddr.find(':') != std::string::npos;
  return (v6 ? "[" + place.masterAddr + "]" : place.masterAddr) + ":" +
         std::to_string(place.masterPort);
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

/// Rank 0's listening socket on every interface at the port (IPv6 taking IPv4 too where it
/// can), so that MASTER_ADDR may be any name the other hosts reach this one by.
bool listenOn(const Place &place, Socket &out, std::string &error) {
  int lastErrno = 0;
  for (int family : {AF_INET6, AF_INET}) {
    Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) {
      lastErrno = errno;
      continue;
    }
    const int one = 1, zero = 0;
    setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (family == AF_INET6) {
      setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(place.masterPort);
      rc = ::bind(s.fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(place.masterPort);
      rc = ::bind(s.fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
    }
    if (rc != 0) {
      lastErrno = errno;
      if (lastErrno == EADDRINUSE)
        break;
      continue;
    }
    if (::listen(s.fd, static_cast<int>(std::min<uint32_t>(place.size, 4096))) != 0 ||
        !nonBlocking(s.fd)) {
      lastErrno = errno;
      continue;
    }
    out = std::move(s);
    return true;
  }
  error = lastErrno == EADDRINUSE
              ? "rank 0 cannot listen on port " + std::to_string(place.masterPort) +
                    ": the port is in use (another job, or an earlier run still holding it); "
                    "choose another MASTER_PORT, or set TESSEL_RENDEZVOUS_PORT"
              : "rank 0 cannot listen on port " + std::to_string(place.masterPort) + ": " +
                    errnoText(lastErrno);
  return false;
}

/// Rank 0: waits for every other rank's hello, then answers all of them.
bool serve(const Place &place, const std::vector<char> &blob, double timeout, std::string &error) {
  Socket listener;
  if (!listenOn(place, listener, error))
    return false;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout));
  std::map<uint32_t, Socket> ranks; // by rank
  auto failAll = [&](const std::string &why) {
    for (auto &[rank, s] : ranks)
      reply(s.fd, kFailed, why.data(), why.size());
    error = why;
    return false;
  };
  while (ranks.size() + 1 < place.size) {
    if (!waitFor(listener.fd, POLLIN, deadline)) {
      if (errno != ETIMEDOUT)
        return failAll("rank 0 stopped listening: " + errnoText(errno));
      std::string missing;
      size_t count = 0;
      for (uint32_t r = 1; r < place.size; ++r)
        if (!ranks.count(r) && count++ < 8)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      if (count > 8)
        missing += " and " + std::to_string(count - 8) + " more";
      return failAll("rank" + std::string(count == 1 ? " " : "s ") + missing + " of WORLD_SIZE=" +
                     std::to_string(place.size) + " never reached rank 0 on " + endpoint(place) +
                     " within " + seconds(timeout) + " (TESSEL_RENDEZVOUS_TIMEOUT)");
    }
    Socket s(::accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (s.fd < 0)
      continue; // the connection went away before it was accepted
    uint32_t hello[4];
    // A connection that sends no hello in time is not one of ours: dropped, not fatal.
    if (!recvWords(s.fd, hello, 4, std::min(deadline, Clock::now() + std::chrono::seconds(10))) ||
        hello[0] != kMagic)
      continue;
    if (hello[1] != kVersion)
      return failAll("a rank speaks version " + std::to_string(hello[1]) +
                     " of the rendezvous and rank 0 version " + std::to_string(kVersion) +
                     ": every process must run the same build");
    const uint32_t rank = hello[2], size = hello[3];
    std::string bad;
    if (size != place.size)
      bad = "rank " + std::to_string(rank) +
            " was started with WORLD_SIZE=" + std::to_string(size) +
            " and rank 0 with WORLD_SIZE=" + std::to_string(place.size) +
            ": every process must be given the same";
    else if (rank == 0 || rank >= place.size)
      bad = "a process says it is rank " + std::to_string(rank) +
            ", which is not one of ranks 1 to " + std::to_string(place.size - 1) +
            " that rank 0 waits for";
    else if (ranks.count(rank))
      bad = "two processes say they are rank " + std::to_string(rank) +
            ": each RANK must be given once";
    if (!bad.empty()) {
      reply(s.fd, kFailed, bad.data(), bad.size());
      return failAll(bad);
    }
    ranks.emplace(rank, std::move(s));
  }
  for (auto &[rank, s] : ranks)
    if (!reply(s.fd, kOk, blob.data(), blob.size())) {
      const std::string why =
          "rank 0 could not send rank " + std::to_string(rank) + " its share: " + errnoText(errno);
      return failAll(why);
    }
  return true;
}

/// One attempt to connect to any address of rank 0's; the socket, or -1 with errno set.
int connectOnce(const addrinfo *addresses, Clock::time_point deadline) {
  int lastErrno = ECONNREFUSED;
  for (const addrinfo *a = addresses; a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd < 0 || !nonBlocking(s.fd)) {
      lastErrno = errno;
      continue;
    }
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        lastErrno = errno;
        continue;
      }
      // One attempt waits at most a second, so that a host that is still coming up is retried.
      if (!waitFor(s.fd, POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(1)))) {
        lastErrno = errno;
        continue;
      }
      int soError = 0;
      socklen_t len = sizeof soError;
      getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &soError, &len);
      if (soError != 0) {
        lastErrno = soError;
        continue;
      }
    }
    const int one = 1;
    setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int fd = s.fd;
    s.fd = -1;
    return fd;
  }
  errno = lastErrno;
  return -1;
}

/// A rank other than 0: connects (retrying while rank 0 is not yet listening), says who it
/// is, and reads the answer.
bool join(const Place &place, std::vector<char> &blob, double timeout, std::string &error) {
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout));
  const std::string where = endpoint(place);
  Socket s;
  std::string last;
  while (s.fd < 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *addresses = nullptr;
    const int rc = ::getaddrinfo(place.masterAddr.c_str(), std::to_string(place.masterPort).c_str(),
                                 &hints, &addresses);
    if (rc != 0) {
      last = std::string("MASTER_ADDR='") + place.masterAddr +
             "' does not resolve: " + gai_strerror(rc);
    } else {
      s.fd = connectOnce(addresses, deadline);
      if (s.fd < 0)
        last = errnoText(errno);
      ::freeaddrinfo(addresses);
    }
    if (s.fd >= 0)
      break;
    if (Clock::now() + std::chrono::milliseconds(100) >= deadline) {
      error = "rank " + std::to_string(place.rank) + " could not reach rank 0 on " + where +
              " within " + seconds(timeout) + " (TESSEL_RENDEZVOUS_TIMEOUT): " + last;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Rank 0 was listening when this rank connected, so its own deadline is at most `timeout`
  // from now: wait a little longer for its answer, so that its reason (the ranks that never
  // came) arrives rather than a timeout of our own.
  const Clock::time_point answerBy = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout + 5));
  uint32_t answer[2];
  if (!sendWords(s.fd, {kMagic, kVersion, place.rank, place.size}, answerBy) ||
      !recvWords(s.fd, answer, 2, answerBy)) {
    const int e = errno;
    error = "rank " + std::to_string(place.rank) + ": rank 0 on " + where +
            (e == ETIMEDOUT
                 ? " did not answer within " + seconds(timeout) + " (TESSEL_RENDEZVOUS_TIMEOUT)"
             : e == 0 ? " closed the connection without an answer (is another program "
                        "listening on MASTER_PORT?)"
                      : " failed: " + errnoText(e));
    return false;
  }
  if ((answer[0] != kOk && answer[0] != kFailed) || answer[1] > kMaxPayload) {
    error = "rank " + std::to_string(place.rank) + ": the program on " + where +
            " is not a Tessel rank 0";
    return false;
  }
  std::vector<char> payload(answer[1]);
  if (!recvAll(s.fd, payload.data(), payload.size(), answerBy)) {
    error = "rank " + std::to_string(place.rank) + ": rank 0's answer was cut short: " +
            (errno ? errnoText(errno) : std::string("the connection closed"));
    return false;
  }
  if (answer[0] == kFailed) {
    error = "rank 0 ended the rendezvous: " + std::string(payload.begin(), payload.end());
    return false;
  }
  blob = std::move(payload);
  return true;
}

} // namespace

bool launched() {
  const char *size = std::getenv("WORLD_SIZE");
  return size && *size;
}

bool readPlace(Place &place, std::string &error) {
  uint64_t rank = 0, size = 0, local = 0, port = 0;
  if (!readNumber("WORLD_SIZE", 1u << 20, size, error) ||
      !readNumber("RANK", 1u << 20, rank, error))
    return false;
  if (size == 0) {
    error = "WORLD_SIZE=0: a job has at least one process";
    return false;
  }
  if (rank >= size) {
    error = "RANK=" + std::to_string(rank) + " is not below WORLD_SIZE=" + std::to_string(size);
    return false;
  }
  local = rank;
  if (const char *l = std::getenv("LOCAL_RANK");
      l && *l && !readNumber("LOCAL_RANK", 1u << 20, local, error))
    return false;
  place.rank = static_cast<uint32_t>(rank);
  place.size = static_cast<uint32_t>(size);
  place.localRank = static_cast<uint32_t>(local);
  if (size == 1)
    return true;
  const char *addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr) {
    error = "MASTER_ADDR is not set: the ranks of a job of WORLD_SIZE=" + std::to_string(size) +
            " meet at rank 0's MASTER_ADDR:MASTER_PORT";
    return false;
  }
  if (!readNumber("MASTER_PORT", 65535, port, error))
    return false;
  if (port == 0) {
    error = "MASTER_PORT=0 is not a port rank 0 can be reached on";
    return false;
  }
  place.masterAddr = addr;
  // torchrun's static rendezvous keeps its own store on MASTER_PORT, held by its agent on the
  // first node (it tells the workers so): the exchange takes the port after it.
  const char *agentStore = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agentStore && std::strcmp(agentStore, "True") == 0) {
    if (port == 65535) {
      error = "MASTER_PORT=65535 is torchrun's store, and there is no port after it for the "
              "rendezvous; set TESSEL_RENDEZVOUS_PORT";
      return false;
    }
    ++port;
  }
  if (const char *own = std::getenv("TESSEL_RENDEZVOUS_PORT"); own && *own) {
    if (!readNumber("TESSEL_RENDEZVOUS_PORT", 65535, port, error))
      return false;
    if (port == 0) {
      error = "TESSEL_RENDEZVOUS_PORT=0 is not a port rank 0 can be reached on";
      return false;
    }
  }
  place.masterPort = static_cast<uint16_t>(port);
  return true;
}

bool timeoutSeconds(double &seconds, std::string &error) {
  seconds = 120;
  const char *text = std::getenv("TESSEL_RENDEZVOUS_TIMEOUT");
  if (!text || !*text)
    return true;
  char *end = nullptr;
  const double v = std::strtod(text, &end);
  if (*end || !(v > 0) || v > 1e6) {
    error = std::string("TESSEL_RENDEZVOUS_TIMEOUT='") + text + "' is not a number of seconds";
    return false;
  }
  seconds = v;
  return true;
}

bool exchange(const Place &place, std::vector<char> &blob, double timeout, std::string &error) {
  if (place.size <= 1)
    return true;
  if (place.rank == 0) {
    if (blob.size() > kMaxPayload) {
      error = "a rendezvous blob of " + std::to_string(blob.size()) + " bytes is too large";
      return false;
    }
    return serve(place, blob, timeout, error);
  }
  return join(place, blob, timeout, error);
}

} // namespace tessel::rt::rendezvous

#!/usr/bin/env bash
# Makes "hosts" on this machine out of Linux network namespaces, so that MPI jobs can be run
# and tested across hosts without a cluster. See docs/multi-host.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/netns-hosts.sh COMMAND ...

Makes N "hosts" on this machine as Linux network namespaces, joined by veth pairs to a bridge
in a hub namespace of their own, on the private network 10.77.0.0/24 (host i is 10.77.0.<i+1>).
Nothing is added to the machine's own network namespace, and the hosts have no route beyond
their private network, so nothing they run can reach another machine. Each set of hosts has
its own name prefix (tessel-<id>-), so several sets can exist at once. Needs root (or
CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.

Commands:
  check                   exit 0 if hosts can be made here; else print why not, exit 1
  up N [--slots S]        make N hosts (each with S MPI slots, default 1) and print the
                          state directory DIR that names them (a new one under $TMPDIR or /tmp)
  down DIR                remove the hosts of DIR: end what still runs in them, delete the
                          namespaces, remove DIR
  down --all              remove every set of hosts this script made (tessel-* namespaces),
                          also ones whose run was killed; ends what runs in them
  list                    the namespaces this script made that exist now
  exec DIR HOST CMD...    run CMD on HOST (its address 10.77.0.x, its name, or its index)
                          in that host's network namespace, with the host's name as hostname
  mpirun DIR ARGS...      run OpenMPI's mpirun from host 0 over the hosts of DIR: their
                          hostfile, scripts/netns-rsh to start daemons on the others, TCP over
                          the private network only, waiting processes yield their core (set
                          as OMPI_MCA_* variables; a --mca in ARGS overrides one); ARGS as
                          for mpirun (e.g. -np 4 ./prog)
  run N [--slots S] -- ARGS...
                          up, then mpirun with ARGS, then down (also when mpirun fails or
                          the script is interrupted); exits with mpirun's status

Example (two hosts of two slots, four processes):
  scripts/netns-hosts.sh run 2 --slots 2 -- -np 4 ./tiny_gpt_parallel --steps 5

The state directory DIR holds:
  hosts      one line per host: index, address, name (= namespace = hostname)
  hostfile   an OpenMPI hostfile: one address per host with its slots
  hub        the hub namespace's name
EOF
}

readonly SUBNET_PREFIX="10.77.0"
readonly SUBNET="${SUBNET_PREFIX}.0/24"
readonly NAME_PREFIX="tessel-"
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "netns-hosts: $*" >&2; exit 1; }
# Runs a command, and ends the script if it fails (also where set -e does not act: inside a
# command substitution, or left of ||).
must() { "$@" || die "'$*' failed"; }

# Why hosts cannot be made here, on stdout; nothing (and status 0) if they can. Makes and
# removes two probe namespaces joined by a veth pair, one with a bridge.
why_not() {
  command -v ip > /dev/null 2>&1 || { echo "the 'ip' command (iproute2) is not installed"; return; }
  command -v unshare > /dev/null 2>&1 || { echo "the 'unshare' command (util-linux) is not installed"; return; }
  local a="${NAME_PREFIX}probe-$$-$RANDOM-a" b="${NAME_PREFIX}probe-$$-$RANDOM-b" out
  if ! out=$(ip netns add "$a" 2>&1); then
    echo "cannot create a network namespace ('ip netns add' as uid $(id -u): ${out//$'\n'/ })"
    return
  fi
  local reason=""
  if ! out=$(ip netns add "$b" 2>&1); then
    reason="cannot create a network namespace ('ip netns add': ${out//$'\n'/ })"
  elif ! out=$(ip link add eth0 netns "$a" type veth peer name eth0 netns "$b" 2>&1); then
    reason="cannot create a veth pair between namespaces (${out//$'\n'/ })"
  elif ! out=$(ip -n "$a" link add br0 type bridge 2>&1); then
    reason="cannot create a bridge in a namespace (${out//$'\n'/ })"
  elif ! out=$(ip netns exec "$a" unshare --uts true 2>&1); then
    reason="cannot enter a namespace ('ip netns exec' with 'unshare --uts': ${out//$'\n'/ })"
  fi
  ip netns del "$a" > /dev/null 2>&1 || true
  ip netns del "$b" > /dev/null 2>&1 || true
  echo -n "$reason"
}

# Ends the processes still running in namespace $1 (by their ids), then deletes it.
remove_namespace() {
  local ns=$1 pids
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qxF "$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -z "$pids" ] && break
      sleep 0.1
    done
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  fi
  ip netns del "$ns" 2>/dev/null || true
}

cmd_down() {
  local dir=${1:?usage: down DIR | down --all}
  if [ "$dir" = "--all" ]; then
    local ns id
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NAME_PREFIX}" || true); do
      remove_namespace "$ns"
      # The state directory of a set whose run was killed (made by `up` under $TMPDIR).
      case $ns in
        "${NAME_PREFIX}"*-hub) id=${ns#"$NAME_PREFIX"}; id=${id%-hub}
                               rm -rf "${TMPDIR:-/tmp}/tessel-netns.$id" ;;
      esac
    done
    return 0
  fi
  [ -f "$dir/hosts" ] || [ -f "$dir/hub" ] || die "$dir is not a state directory of netns-hosts.sh up"
  local index addr name
  if [ -f "$dir/hosts" ]; then
    while read -r index addr name; do remove_namespace "$name"; done < "$dir/hosts"
  fi
  [ -f "$dir/hub" ] && remove_namespace "$(cat "$dir/hub")"
  rm -rf "$dir"
}

# up N [--slots S]: prints DIR on stdout. On any failure, removes what it made.
cmd_up() {
  local n="" slots=1
  while [ $# -gt 0 ]; do
    case $1 in
      --slots) slots=${2:?--slots needs a number}; shift 2 ;;
      --slots=*) slots=${1#--slots=}; shift ;;
      *) [ -z "$n" ] || die "up: unexpected argument '$1'"; n=$1; shift ;;
    esac
  done
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then
    die "up: N must be 1 to 250"
  fi
  if ! [[ "$slots" =~ ^[0-9]+$ ]] || [ "$slots" -lt 1 ]; then
    die "up: --slots must be a positive number"
  fi
  local reason
  reason=$(why_not)
  [ -z "$reason" ] || die "cannot make hosts here: $reason"

  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tessel-netns.XXXXXX") || die "up: cannot make a state directory"
  local id=${dir##*.}
  local prefix="${NAME_PREFIX}${id}"
  local hub="${prefix}-hub"
  # From here on, a failure removes everything made so far.
  # (The directory is written into the trap: a trap may run where this function's locals are gone.)
  # shellcheck disable=SC2064
  trap "cmd_down '$dir' > /dev/null 2>&1 || true" EXIT
  echo "$hub" > "$dir/hub"
  : > "$dir/hosts"
  : > "$dir/hostfile"

  must ip netns add "$hub"
  must ip -n "$hub" link set lo up
  must ip -n "$hub" link add br0 type bridge
  must ip -n "$hub" link set br0 up
  local i name addr
  for ((i = 0; i < n; i++)); do
    name="${prefix}-h${i}"
    addr="${SUBNET_PREFIX}.$((i + 1))"
    must ip netns add "$name"
    echo "$i $addr $name" >> "$dir/hosts"
    must ip -n "$name" link set lo up
    # The host's end is eth0 in its namespace, the hub's end h<i> on the bridge; both are made
    # inside their namespaces, so no name can clash with the machine's own interfaces.
    must ip link add eth0 netns "$name" type veth peer name "h${i}" netns "$hub"
    must ip -n "$hub" link set "h${i}" master br0
    must ip -n "$hub" link set "h${i}" up
    must ip -n "$name" addr add "${addr}/24" dev eth0
    must ip -n "$name" link set eth0 up
    echo "$addr slots=$slots" >> "$dir/hostfile"
  done
  # Wait until host 0 reaches every other host: a TCP connection to a closed port is refused
  # by a host that is reachable (port 9, discard: nothing listens there).
  local first="${prefix}-h0" tries out
  for ((i = 1; i < n; i++)); do
    for ((tries = 0; ; tries++)); do
      out=$(ip netns exec "$first" timeout 2 bash -c \
        "exec 3<>/dev/tcp/${SUBNET_PREFIX}.$((i + 1))/9" 2>&1) && break
      [[ "$out" == *refused* ]] && break
      [ "$tries" -lt 20 ] || die "up: host $i is not reachable from host 0 ($out)"
      sleep 0.1
    done
  done
  trap - EXIT
  echo "$dir"
}

# The namespace of HOST in DIR: HOST is an index, an address or a name.
namespace_of() {
  local dir=$1 host=$2 index addr name
  [ -f "$dir/hosts" ] || die "$dir is not a state directory of netns-hosts.sh up"
  while read -r index addr name; do
    if [ "$host" = "$index" ] || [ "$host" = "$addr" ] || [ "$host" = "$name" ]; then
      echo "$name"
      return 0
    fi
  done < "$dir/hosts"
  die "no host '$host' in $dir/hosts"
}

cmd_exec() {
  local dir=${1:?usage: exec DIR HOST CMD...} host=${2:?usage: exec DIR HOST CMD...}
  shift 2
  [ $# -gt 0 ] || die "exec: no command"
  local ns
  ns=$(namespace_of "$dir" "$host")
  # A UTS namespace of its own gives the host its own hostname, as a real host has: OpenMPI
  # names nodes and its session directories by it, and MPI_Get_processor_name reports it.
  # shellcheck disable=SC2016
  exec ip netns exec "$ns" unshare --uts -- \
    sh -c 'echo "$1" > /proc/sys/kernel/hostname && shift && exec "$@"' sh "$ns" "$@"
}

cmd_mpirun() {
  local dir=${1:?usage: mpirun DIR ARGS...}
  shift
  [ -f "$dir/hostfile" ] || die "$dir is not a state directory of netns-hosts.sh up"
  command -v mpirun > /dev/null 2>&1 || die "mpirun is not installed (Debian: openmpi-bin)"
  dir=$(cd "$dir" && pwd)
  # The settings are MCA variables in the environment, each unless already set, so that a
  # --mca in ARGS overrides any of them. mpirun passes its environment on to the agent, the
  # daemons it starts and the processes.
  setting() { [ -n "${!1:-}" ] || export "$1=$2"; }
  # The hosts, each with its slots.
  setting OMPI_MCA_orte_default_hostfile "$dir/hostfile"
  # Daemons on the other hosts are started by entering their namespaces, not by ssh; every
  # one directly by mpirun (in a tree, daemons would start others through the agent too).
  setting OMPI_MCA_plm_rsh_agent "$script_dir/netns-rsh"
  setting OMPI_MCA_plm_rsh_no_tree_spawn 1
  # Processes talk over TCP on the hosts' private network only, also two on the same host,
  # so every message crosses a veth interface; the daemons' own channel likewise.
  setting OMPI_MCA_btl tcp,self
  setting OMPI_MCA_btl_tcp_if_include "$SUBNET"
  setting OMPI_MCA_oob_tcp_if_include "$SUBNET"
  # The hosts share this machine's cores, which the slots of the hostfile do not know: a
  # process waiting for a message yields its core rather than spinning (4 processes on 2
  # cores train tiny_gpt_parallel 10x faster so).
  setting OMPI_MCA_mpi_yield_when_idle 1
  # OpenMPI refuses to run as root unless told to (a container or CI machine often is root).
  if [ "$(id -u)" -eq 0 ]; then
    setting OMPI_ALLOW_RUN_AS_ROOT 1
    setting OMPI_ALLOW_RUN_AS_ROOT_CONFIRM 1
  fi
  # Where the agent finds the hosts.
  export TESSEL_NETNS_DIR="$dir"
  cmd_exec "$dir" 0 mpirun "$@"
}

cmd_run() {
  local n="" up_args=()
  while [ $# -gt 0 ]; do
    case $1 in
      --) shift; break ;;
      --slots) up_args+=(--slots "${2:?--slots needs a number}"); shift 2 ;;
      --slots=*) up_args+=("$1"); shift ;;
      *) [ -z "$n" ] || die "run: unexpected argument '$1' (mpirun's arguments follow --)"; n=$1; shift ;;
    esac
  done
  [ -n "$n" ] || die "usage: run N [--slots S] -- MPIRUN-ARGS..."
  local dir
  dir=$(cmd_up "$n" "${up_args[@]}") || exit 1
  # shellcheck disable=SC2064
  trap "cmd_down '$dir' || true" EXIT
  # mpirun runs in the background so that a signal to this script is handled at once (bash
  # runs a trap only after the foreground command ends): it is passed on to mpirun, which ends
  # the job, and then the hosts are removed. Its standard input stays this script's.
  exec 3<&0
  cmd_mpirun "$dir" "$@" <&3 3<&- &
  local child=$!
  exec 3<&-
  trap 'kill -INT '"$child"' 2>/dev/null || true; wait '"$child"' || true; exit 130' INT
  trap 'kill -TERM '"$child"' 2>/dev/null || true; wait '"$child"' || true; exit 143' TERM
  local status=0
  wait "$child" || status=$?
  exit "$status"
}

case ${1:-} in
  check)
    reason=$(why_not)
    if [ -n "$reason" ]; then echo "$reason"; exit 1; fi
    ;;
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down "$@" ;;
  list) ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NAME_PREFIX}" || true ;;
  exec) shift; cmd_exec "$@" ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  run) shift; cmd_run "$@" ;;
  -h|--help|help) usage ;;
  "") usage >&2; exit 2 ;;
  *) echo "netns-hosts: unknown command '$1'" >&2; usage >&2; exit 2 ;;
esac

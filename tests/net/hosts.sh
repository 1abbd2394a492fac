# hosts.sh — sourced by tests/net/netns.sh and bench/netns_env.sh: two "hosts" made of
# network namespaces joined by a veth pair shaped to a rate, each with its own hostname, and
# `across`, which runs a command under mpirun on both over TCP from a hostfile, with a launch
# agent that enters the namespace in place of ssh. Needs root, ip, tc and unshare.
#
#   hosts_up RATE      (e.g. 1gbit): sets ns0 ns1 net tmp_hosts; returns non-zero with a
#                      reason on stderr when namespaces cannot be made
#   across ARGS...     mpirun -np 2 over the hosts, ARGS being the program and its arguments
#   $tmp_hosts/mpirun  the same as a launcher for dtrain launch --mpirun (it takes launch's
#                      -n and --hostfile; passes DTRAIN_TEST_KILL on to the ranks)
#   hosts_down

hosts_up() {
    tag=$$
    ns0="dtns$tag-0" ns1="dtns$tag-1"
    net="10.$((100 + tag % 100)).$((tag / 100 % 250))"
    tmp_hosts=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-hosts-XXXXXX") || return 1
    ip netns add "$ns0" 2>"$tmp_hosts/err" ||
        { echo "cannot create a network namespace: $(cat "$tmp_hosts/err")" >&2; return 1; }
    ip netns add "$ns1" &&
        ip link add "dtv${tag}a" type veth peer name "dtv${tag}b" &&
        ip link set "dtv${tag}a" netns "$ns0" && ip link set "dtv${tag}b" netns "$ns1" &&
        ip -n "$ns0" addr add "$net.1/24" dev "dtv${tag}a" &&
        ip -n "$ns1" addr add "$net.2/24" dev "dtv${tag}b" &&
        ip -n "$ns0" link set "dtv${tag}a" up && ip -n "$ns1" link set "dtv${tag}b" up &&
        ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up ||
        { echo "cannot wire the namespaces (veth)" >&2; return 1; }
    for side in "$ns0 dtv${tag}a" "$ns1 dtv${tag}b"; do
        set -- $side
        ip netns exec "$1" tc qdisc add dev "$2" root netem delay 100us rate "$RATE" 2>/dev/null ||
            ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst 256kb latency 10ms ||
            { echo "tc cannot shape the link" >&2; return 1; }
    done
    cat >"$tmp_hosts/agent" <<AGENT
#!/bin/sh
host=\$1
shift
case \$host in
$net.1) ns=$ns0 name=host0 ;;
$net.2) ns=$ns1 name=host1 ;;
*) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
# The command is a shell line (Open MPI may set PATH and LD_LIBRARY_PATH in front of it).
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$name && \$*"
AGENT
    chmod +x "$tmp_hosts/agent"
    printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" >"$tmp_hosts/hosts"
    cat >"$tmp_hosts/mpirun" <<WRAP
#!/bin/sh
exec ip netns exec "$ns0" unshare --uts /bin/sh -c 'hostname host0 && exec "\$@"' sh \\
    "$MPIRUN" --mca plm_rsh_agent "$tmp_hosts/agent" --mca btl tcp,self \\
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" \\
    -x OPENBLAS_NUM_THREADS=1 -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \\
    -x DTRAIN_TEST_KILL "\$@"
WRAP
    chmod +x "$tmp_hosts/mpirun"
}

across() {
    ip netns exec "$ns0" unshare --uts /bin/sh -c 'hostname host0 && exec "$@"' sh \
        "$MPIRUN" --mca plm_rsh_agent "$tmp_hosts/agent" --mca btl tcp,self \
        --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" \
        --hostfile "$tmp_hosts/hosts" -np 2 -x OPENBLAS_NUM_THREADS=1 -x OMPI_ALLOW_RUN_AS_ROOT \
        -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$@"
}

hosts_down() {
    for ns in "$ns0" "$ns1"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp_hosts"
}

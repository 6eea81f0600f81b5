# bench/lib/pg.sh: what the bench scripts share: a throwaway PostgreSQL 15
# cluster and a metadatad in a temporary directory, removed on exit, and a
# few numeric helpers. Sourced, not run.
#
# The sourcing script sets, before calling any of these: work (its
# temporary directory, made with mktemp -d), PG_PORT (the cluster's port),
# and may set daemon_pid (a metadatad it started) for cleanup to stop.
# bench_init installs PostgreSQL 15 when missing and sets the cleanup trap.

pgbin=/usr/lib/postgresql/15/bin
daemon_pid=
pg_started=

# bench_cleanup stops the daemon and the cluster, if running, and removes work.
bench_cleanup() {
	if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
	if [[ -n $pg_started ]]; then as_postgres "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}

# bench_init installs Debian's PostgreSQL 15 if missing and removes
# everything the script made when it exits.
bench_init() {
	chmod 755 "$work"
	trap bench_cleanup EXIT
	if [[ ! -x $pgbin/pgbench ]]; then
		echo "installing PostgreSQL 15 (Debian's postgresql package)" >&2
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	fi
}

# as_postgres runs a command as the postgres user (PostgreSQL refuses root).
as_postgres() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# init_pg makes a durable cluster (fsync, synchronous_commit and
# full_page_writes on, PostgreSQL's defaults) in $work/pg, its socket in
# $work/sock, and starts it.
init_pg() {
	mkdir -p "$work/pg" "$work/sock"
	if [[ $(id -u) == 0 ]]; then chown postgres "$work/pg" "$work/sock"; fi
	as_postgres "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >/dev/null
	start_pg
}

# start_pg starts the cluster again if a part before stopped it.
start_pg() {
	if [[ -n $pg_started ]]; then return; fi
	as_postgres "$pgbin/pg_ctl" -D "$work/pg" -l "$work/sock/pg.log" -w \
		-o "-p $PG_PORT -k $work/sock -c listen_addresses='' -c max_connections=100" start >/dev/null
	pg_started=1
}

# stop_pg stops the cluster cleanly.
stop_pg() {
	as_postgres "$pgbin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null
	pg_started=
}

# wait_daemon waits until the metadatad at $1 answers health checks, using
# the metadata-load binary $2.
wait_daemon() {
	for _ in $(seq 100); do
		if "$2" ceiling -addr "$1" -duration 100ms -progress off >/dev/null 2>&1; then return; fi
		sleep 0.1
	done
	echo "metadatad at $1 did not answer" >&2
	return 1
}

# median of numbers, to 6 decimals (plain notation, for bc).
median() {
	printf '%s\n' "$@" | sort -g |
		awk '{v[NR] = $1} END {if (NR == 0) exit 1; printf "%.6f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# seconds of a duration written as Ns or Nm.
seconds() { local d=$1; case $d in *m) echo $((${d%m} * 60)) ;; *s) echo "${d%s}" ;; *) echo "$d" ;; esac; }

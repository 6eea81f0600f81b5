#!/usr/bin/env bash
# purge-under-traffic.sh: a purge of settled rows under steady traffic,
# metadatad against PostgreSQL 15 on this machine, in one run (issue 44).
#
# The traffic is the same on both sides: RATE calls per second (half
# creates of a new image of a random one of 1,000 live cameras, half
# GetLatest of a random live camera) from CONCURRENCY clients, for
# DURATION; halfway through, the purge of a case's expired rows starts.
# A case is ROWS:CAMERAS: ROWS expired rows spread evenly over CAMERAS
# cameras of their own (not the live ones).
#
# PostgreSQL: a table of the image table's shape (a primary key on camera
# and capture time, one index on capture time; autovacuum off on it) holds
# the case's rows and each live camera's first row; VACUUM ANALYZE and
# CHECKPOINT settle it; pgbench -R RATE runs two scripts, @1 each (an
# insert of a new image, a select of the newest image), logging every
# transaction (--log); at DURATION/2 psql runs DELETE ... WHERE
# captured_at < cutoff, timed by \timing, which must report the case's
# rows.
#
# metadatad: the daemon starts on a fresh data directory, metadata-load
# seed writes the case's rows (single images of -purge-cameras CAMERAS
# cameras, all older than the purge's cutoff and the daemon's retention
# floor) and each live camera's first image; the daemon stops, `metadatad
# compact` settles the store, and the daemon starts again at its defaults;
# metadata-load purge-during -skip-seed runs the traffic and starts the
# purge at DURATION/2 (-min-span MIN_SPAN); the job's
# metadata_rows_deleted must be the case's rows. Its purge time is the
# job's own (start_time to end_time).
#
# Latency, both sides alike: every call started in the purge's window (from
# its start, for max(its time, MIN_SPAN)) against every call started in as
# long a window just before it; p99 and p99.9 of all calls together,
# during over before. A call's latency is its own time from its start (a
# pgbench transaction's time less its schedule lag), so the two sides are
# measured the same way.
#
# It prints one table: per case and run, the purge seconds of each side,
# "x" (PostgreSQL's seconds over metadatad's: above 1, metadatad is
# faster), and each side's p99 and p99.9 during/before ratios; with RUNS
# above 1, the median of each column per case. It removes everything it
# made.
#
# usage: bench/purge-under-traffic.sh [BUILD_DIR]
#   BUILD_DIR holds metadatad and metadata-load binaries; without it, it
#   builds this tree.
# environment: DURATION (20s) of the traffic; RATE (1000) calls per
#   second; CONCURRENCY (64) clients on each side; MIN_SPAN (5s); CASES
#   ("200000:40 200000:4000 100000:10000"), each case's rows per camera a
#   multiple of 10; RUNS (1) per case; LOG_LEVEL of the daemon (its
#   default unless set); MD_FLAGS, more flags for the daemon (word-split,
#   e.g. "-purge-live-share 0.5"); PG_PORT (55442), GRPC_PORT (50981); REPORTS, a
#   directory to keep each run's metadata-load report and pgbench summary in.
set -euo pipefail

DURATION=${DURATION:-20s}
RATE=${RATE:-1000}
CONCURRENCY=${CONCURRENCY:-64}
MIN_SPAN=${MIN_SPAN:-5s}
CASES=${CASES:-200000:40 200000:4000 100000:10000}
RUNS=${RUNS:-1}
REPORTS=${REPORTS:-}
LOG_LEVEL=${LOG_LEVEL:-}
MD_FLAGS=${MD_FLAGS:-}
PG_PORT=${PG_PORT:-55442}
GRPC_PORT=${GRPC_PORT:-50981}
LIVE_CAMERAS=1000
if [[ $# -gt 1 || ( $# == 1 && ! -x ${1:-}/metadatad ) ]]; then
	echo "usage: $0 [BUILD_DIR]: a BUILD_DIR holds metadatad and metadata-load" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/purge-under-traffic.XXXXXX)
# shellcheck source=bench/lib/pg.sh
source "$root/bench/lib/pg.sh"
bench_init

if ! [[ $RUNS =~ ^[1-9][0-9]*$ ]]; then echo "RUNS must be a positive integer, not \"$RUNS\"" >&2; exit 1; fi
for c in $CASES; do
	if ! [[ $c =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || (((${c%:*} / ${c#*:}) % 10 != 0 || ${c%:*} % ${c#*:} != 0)); then
		echo "case \"$c\" is not ROWS:CAMERAS with ROWS a multiple of 10 per camera" >&2
		exit 1
	fi
done
duration_s=$(seconds "$DURATION")
min_span_s=$(seconds "$MIN_SPAN")

build=${1:-}
if [[ -z $build ]]; then
	build=$work/build
	mkdir -p "$build"
	(cd "$root" && go build -o "$build/" ./cmd/metadatad ./cmd/metadata-load)
fi

echo "machine: $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

init_pg
psql=(as_postgres psql -q -X -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -c "create database bench" >/dev/null
# The two pgbench scripts: a new image of a random live camera now, and
# the newest image of a random live camera.
cat >"$work/insert.sql" <<'SQL'
\set cam random(0, 999)
insert into purge_images values ('load-cam-' || lpad(:cam::text, 6, '0'), clock_timestamp(),
  'https://images.example/load-cam-' || :cam || '/new.jpg', 'image/jpeg', 350000, 1920, 1080, '{"site":"north"}')
  on conflict do nothing;
SQL
cat >"$work/latest.sql" <<'SQL'
\set cam random(0, 999)
select * from purge_images where camera_id = 'load-cam-' || lpad(:cam::text, 6, '0') order by captured_at desc limit 1;
SQL
mkdir -p "$work/pglog"
chmod 644 "$work/insert.sql" "$work/latest.sql"
if [[ $(id -u) == 0 ]]; then chown postgres "$work/pglog"; fi

# Each side's figures of a run: the purge's seconds and the p99 and p99.9
# ratios, set by pg_case and md_case (run in this shell, so that cleanup
# sees the daemon they start and a failure ends the script).
res_s= res_p99= res_p999=

# pg_case loads a case ($1 rows over $2 cameras), runs the traffic and the
# DELETE, and sets the result.
pg_case() {
	local rows=$1 cams=$2 step_us=$((60000000000 / $1)) # 1,000 minutes over the expired rows
	"${psql[@]}" -d bench >/dev/null <<SQL
set client_min_messages = warning;
drop table if exists purge_images;
create table purge_images (
	camera_id    text        not null,
	captured_at  timestamptz not null,
	blob_uri     text        not null,
	content_type text        not null,
	size_bytes   bigint      not null,
	width        int         not null,
	height       int         not null,
	attributes   jsonb,
	primary key (camera_id, captured_at)
) with (autovacuum_enabled = off);
create index purge_images_by_time on purge_images (captured_at);
insert into purge_images select 'old-cam-' || lpad((i % $cams)::text, 6, '0'), timestamptz '2026-01-01' + i * interval '$step_us microseconds',
  'https://images.example/old-cam-' || (i % $cams) || '/' || i || '.jpg', 'image/jpeg', 350000, 1920, 1080, null
  from generate_series(0, $rows - 1) i;
insert into purge_images select 'load-cam-' || lpad(c::text, 6, '0'), now() - interval '1 minute',
  'https://images.example/load-cam-' || c || '/first.jpg', 'image/jpeg', 350000, 1920, 1080, '{"site":"north"}'
  from generate_series(0, $LIVE_CAMERAS - 1) c;
vacuum analyze purge_images;
checkpoint;
SQL
	rm -f "$work"/pglog/*
	as_postgres "$pgbin/pgbench" -n -h "$work/sock" -p "$PG_PORT" -U postgres -c "$CONCURRENCY" -j "$(nproc)" \
		-R "$RATE" -T "$duration_s" --log --log-prefix="$work/pglog/tx" \
		-f "$work/insert.sql@1" -f "$work/latest.sql@1" bench >"$work/pgbench.out" 2>&1 &
	local bench_pid=$!
	sleep "$(echo "$duration_s / 2" | bc -l)"
	# The DELETE starts right after the clock is read, in the same session.
	local out
	out=$(as_postgres psql -X -At -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -d bench \
		-c "select 'start ' || extract(epoch from clock_timestamp())" -c '\timing on' \
		-c "delete from purge_images where captured_at < timestamptz '2026-02-01'")
	if ! wait "$bench_pid"; then
		echo "pgbench failed:" >&2
		cat "$work/pgbench.out" >&2
		exit 1
	fi
	local start deleted delete_ms
	read -r start deleted delete_ms < <(awk '/^start / {s = $2} /^DELETE [0-9]+$/ {n = $2} /^Time: / {t = $2}
		END {print (s == "" ? "none" : s), (n == "" ? "none" : n), (t == "" ? "none" : t)}' <<<"$out")
	if [[ $deleted != "$rows" || $delete_ms == none || $start == none ]]; then
		printf 'postgresql, %d rows over %d cameras: DELETE removed %s rows, want %d; psql said:\n%s\n' \
			"$rows" "$cams" "$deleted" "$rows" "$out" >&2
		exit 1
	fi
	local delete_s
	delete_s=$(echo "$delete_ms / 1000" | bc -l)
	# pgbench's log: client, transaction, time (us, from its scheduled
	# start), script, end (epoch s, us), schedule lag (us). A
	# transaction's own time is time less lag; it started that long
	# before its end.
	local res
	res=$(cat "$work"/pglog/tx.* | awk -v s="$start" -v d="$delete_s" -v m="$min_span_s" '
		BEGIN {len = d > m ? d : m}
		{took = $3 - (NF >= 7 ? $7 : 0); t = $5 + $6 / 1e6 - took / 1e6
		 if (t >= s - len && t < s) print "before", took; else if (t >= s && t < s + len) print "during", took}' |
		sort -k1,1 -k2,2n | tails "$delete_s")
	read -r res_s res_p99 res_p999 <<<"$res"
}

# tails reads "side latency" lines sorted by side, then latency, and prints
# the seconds $1, then the p99 and p99.9 ratios of during over before.
tails() {
	awk -v secs="$1" '
		function q(p,   r) {r = int(p * n); if (r < p * n) r++; return v[r]}
		function flush() {if (side != "") {p99[side] = q(0.99); p999[side] = q(0.999); calls[side] = n}; n = 0}
		$1 != side {flush(); side = $1}
		{v[++n] = $2}
		END {flush()
			if (calls["before"] == 0 || calls["during"] == 0) {print "no calls in a window" > "/dev/stderr"; exit 1}
			printf "%.6f %.3f %.3f\n", secs, p99["during"] / p99["before"], p999["during"] / p999["before"]}'
}

# md_case does the same for metadatad: the job's seconds and the ratios of
# all calls, from metadata-load's report.
md_case() {
	local rows=$1 cams=$2 data=$work/data addr=127.0.0.1:$GRPC_PORT
	local per=$((rows / cams))
	# An image a minute (the load tool seeds whole minutes): per minutes of
	# history, ending more than a day ago (past the daemon's retention
	# floor). PostgreSQL's rows lie closer (1,000 minutes), which only
	# gives the embedded store more days to delete.
	local days=$((per / 1440 + 2))
	local fleets=(-cameras "$LIVE_CAMERAS" -purge-cameras "$cams" -purge-camera-prefix old-cam- -types single
		-days "$days" -seed-interval 1m -purge-older-than "$((days * 1440 - per))m" -progress off -server-pid -1)
	local flags=(-listen "$addr" -data-dir "$data")
	if [[ -n $LOG_LEVEL ]]; then flags+=(-log-level "$LOG_LEVEL"); fi
	# shellcheck disable=SC2206 # word-split on purpose
	flags+=($MD_FLAGS)
	rm -rf "$data"
	start_daemon "${flags[@]}"
	if ! "$build/metadata-load" seed -addr "$addr" "${fleets[@]}" >"$work/seed.json"; then
		echo "seeding failed; the daemon's log ends:" >&2
		tail -20 "$work/daemon.log" >&2
		exit 1
	fi
	stop_daemon
	"$build/metadatad" compact -data-dir "$data" >>"$work/daemon.log" 2>&1
	start_daemon "${flags[@]}"
	if ! "$build/metadata-load" purge-during -addr "$addr" "${fleets[@]}" -skip-seed -rate "$RATE" -concurrency "$CONCURRENCY" \
		-mix create=1,get-latest=1 -duration "$DURATION" -min-span "$MIN_SPAN" >"$work/purge.json"; then
		echo "metadata-load purge-during failed; its report:" >&2
		cat "$work/purge.json" >&2
		exit 1
	fi
	stop_daemon
	local deleted errors before span
	read -r deleted errors < <(jq -r '[.purge.metadata_rows_deleted, .errors] | @tsv' "$work/purge.json")
	if [[ $deleted != "$rows" || $errors != 0 ]]; then
		echo "metadatad, $rows rows over $cams cameras: the job deleted $deleted rows, want $rows; $errors calls failed" >&2
		exit 1
	fi
	read -r res_s res_p99 res_p999 before span < <(jq -r '.purge | [.job_seconds, .window.p99_during_vs_before.all,
		.window.p999_during_vs_before.all, .window.before.covered_seconds, .window.span_seconds] | @tsv' "$work/purge.json")
	if [[ $before != "$span" ]]; then
		echo "metadatad, $rows rows over $cams cameras: the traffic covered $before s of the $span s window before the purge; give a longer DURATION" >&2
	fi
}

start_daemon() {
	"$build/metadatad" "$@" 2>>"$work/daemon.log" &
	daemon_pid=$!
	wait_daemon "127.0.0.1:$GRPC_PORT" "$build/metadata-load"
}

stop_daemon() {
	kill "$daemon_pid" && wait "$daemon_pid" || true
	daemon_pid=
}

printf '\npurge under %s calls/s (half creates, half GetLatest) for %s, purge at the middle; seconds; "x" is\n' "$RATE" "$DURATION"
printf 'PostgreSQL DELETE seconds / metadatad job seconds (above 1: metadatad is faster); d/b: p99 or p99.9 of the\n'
printf 'calls started in the purge window (at least %s) over the same span just before it\n' "$MIN_SPAN"
row() { printf '%-7s %7s %7s %9s %9s %8s %9s %10s %9s %10s\n' "$@"; }
row run rows cameras "pg s" "md s" x "pg p99" "pg p99.9" "md p99" "md p99.9"
summary=()
for c in $CASES; do
	rows=${c%:*} cams=${c#*:}
	pg_s=() md_s=() xs=() pg99=() pg999=() md99=() md999=()
	for run in $(seq "$RUNS"); do
		pg_case "$rows" "$cams"
		p=$res_s p99=$res_p99 p999=$res_p999
		md_case "$rows" "$cams"
		m=$res_s m99=$res_p99 m999=$res_p999
		if [[ -n $REPORTS ]]; then
			mkdir -p "$REPORTS"
			cp "$work/purge.json" "$REPORTS/metadatad-$rows-$cams-$run.json"
			cp "$work/pgbench.out" "$REPORTS/pgbench-$rows-$cams-$run.txt"
		fi
		x=$(echo "$p / $m" | bc -l)
		pg_s+=("$p") md_s+=("$m") xs+=("$x") pg99+=("$p99") pg999+=("$p999") md99+=("$m99") md999+=("$m999")
		row "$run" "$rows" "$cams" "$(printf %.3f "$p")" "$(printf %.3f "$m")" "$(printf %.2f "$x")" \
			"$(printf %.2f "$p99")" "$(printf %.2f "$p999")" "$(printf %.2f "$m99")" "$(printf %.2f "$m999")"
	done
	if ((RUNS > 1)); then
		summary+=("$(row median "$rows" "$cams" "$(printf %.3f "$(median "${pg_s[@]}")")" "$(printf %.3f "$(median "${md_s[@]}")")" \
			"$(printf %.2f "$(median "${xs[@]}")")" "$(printf %.2f "$(median "${pg99[@]}")")" "$(printf %.2f "$(median "${pg999[@]}")")" \
			"$(printf %.2f "$(median "${md99[@]}")")" "$(printf %.2f "$(median "${md999[@]}")")")")
	fi
done
if ((${#summary[@]} > 0)); then printf '%s\n' "${summary[@]}"; fi
stop_pg
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

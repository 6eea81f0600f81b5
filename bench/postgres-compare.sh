#!/usr/bin/env bash
# postgres-compare.sh: durable creates of metadatad against PostgreSQL 15 on
# this machine, in one run, as ratios.
#
# It starts a throwaway PostgreSQL 15 cluster (installing Debian's package if
# missing) in a temporary directory, runs pgbench with 16 clients of durable
# single-row inserts (synchronous_commit on, fsync on) into a table of the
# image table's shape (a primary key on camera and capture time, one index on
# capture time), then, for every build given, starts metadatad on a fresh
# embedded store and runs metadata-load's creates through gRPC at 16 and 64
# clients, with a health-check ceiling at the same concurrency. It prints
# each figure and its ratio to PostgreSQL, and removes everything it made.
#
# Then purges: PostgreSQL's DELETE ... WHERE captured_at < cutoff of 200,000
# rows spread over 1,000 minutes and over 40, then 4,000 cameras (one recent
# row per camera kept, the table checkpointed first), timed by psql, against
# metadatad's purge of the same layout on its embedded store
# (BenchmarkPurgeAgainstPostgres in store/retention, from the time the job
# starts to its end).
#
# usage: bench/postgres-compare.sh [BUILD_DIR ...]
#   BUILD_DIR holds metadatad and metadata-load binaries (and retention.test,
#   `go test -c ./store/retention`, for the purge); give two (before, after)
#   to compare builds in one run. Without one, it builds this tree.
# environment: DURATION (default 20s) per measurement; PG_CLIENTS (16);
#   CLIENTS ("16 64"); LOG_LEVEL of the daemon (info: one line per call);
#   PARTS ("creates purge") to run one part only.
set -euo pipefail

DURATION=${DURATION:-20s}
PG_CLIENTS=${PG_CLIENTS:-16}
CLIENTS=${CLIENTS:-16 64}
PARTS=${PARTS:-creates purge}
LOG_LEVEL=${LOG_LEVEL:-info}
PG_PORT=${PG_PORT:-55432}
GRPC_PORT=${GRPC_PORT:-50971}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/postgres-compare.XXXXXX)
chmod 755 "$work"
pgbin=/usr/lib/postgresql/15/bin
daemon_pid=
pg_started=

cleanup() {
	if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
	if [[ -n $pg_started ]]; then as_postgres "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# as_postgres runs a command as the postgres user (PostgreSQL refuses root).
as_postgres() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

seconds() { local d=$1; case $d in *m) echo $((${d%m} * 60)) ;; *s) echo "${d%s}" ;; *) echo "$d" ;; esac; }

if [[ ! -x $pgbin/pgbench ]]; then
	echo "installing PostgreSQL 15 (Debian's postgresql package)" >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

builds=("$@")
if [[ ${#builds[@]} == 0 ]]; then
	mkdir -p "$work/build"
	(cd "$root" && go build -o "$work/build/" ./cmd/metadatad ./cmd/metadata-load &&
		go test -c -o "$work/build/retention.test" ./store/retention)
	builds=("$work/build")
fi

echo "machine: $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# PostgreSQL: durable by default (fsync, synchronous_commit, full_page_writes on).
mkdir -p "$work/pg" "$work/sock"
if [[ $(id -u) == 0 ]]; then chown postgres "$work/pg" "$work/sock"; fi
as_postgres "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >/dev/null
as_postgres "$pgbin/pg_ctl" -D "$work/pg" -l "$work/sock/pg.log" -w \
	-o "-p $PG_PORT -k $work/sock -c listen_addresses='' -c max_connections=100" start >/dev/null
pg_started=1
psql=(as_postgres psql -q -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -c "create database bench" >/dev/null
"${psql[@]}" -d bench >/dev/null <<'SQL'
create table single_image_metadata (
	camera_id    text        not null,
	captured_at  timestamptz not null,
	blob_uri     text        not null,
	content_type text        not null,
	size_bytes   bigint      not null,
	width        int         not null,
	height       int         not null,
	attributes   jsonb,
	primary key (camera_id, captured_at)
);
create index single_image_metadata_by_time on single_image_metadata (captured_at);
SQL
cat > "$work/insert.sql" <<'SQL'
\set cam random(1, 1000)
\set n random(1, 1000000000000)
insert into single_image_metadata values ('load-cam-' || :cam, timestamptz '2026-01-01' + :n * interval '1 microsecond',
  'https://blobs.example/load-cam-' || :cam || '/' || :n || '.jpg', 'image/jpeg', 345678, 1920, 1080, '{"site":"north"}');
SQL
chmod 644 "$work/insert.sql"
if [[ " $PARTS " == *" creates "* ]]; then
	pg_tps=$(as_postgres "$pgbin/pgbench" -n -h "$work/sock" -p "$PG_PORT" -U postgres -c "$PG_CLIENTS" -j "$(nproc)" \
		-T "$(seconds "$DURATION")" -f "$work/insert.sql" bench 2>/dev/null |
		awk '/^tps = / {print $3; exit}')
	rows=$("${psql[@]}" -d bench -At -c "select count(*) from single_image_metadata")
	as_postgres "$pgbin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null
	pg_started=
	printf 'postgresql 15, pgbench %d clients: %.0f inserts/s (%s rows)\n' "$PG_CLIENTS" "$pg_tps" "$rows"

	printf '\n%-28s %8s %12s %12s %10s %14s\n' build clients creates/s health/s "vs pg" "vs health"
	for build in "${builds[@]}"; do
		for c in $CLIENTS; do
			data="$work/data-$c"
			"$build/metadatad" -listen "127.0.0.1:$GRPC_PORT" -data-dir "$data" -log-level "$LOG_LEVEL" 2>"$work/daemon.log" &
			daemon_pid=$!
			for _ in $(seq 100); do
				if "$build/metadata-load" ceiling -addr "127.0.0.1:$GRPC_PORT" -duration 100ms -progress off >/dev/null 2>&1; then break; fi
				sleep 0.1
			done
			"$build/metadata-load" bench -addr "127.0.0.1:$GRPC_PORT" -types single -mix create=1 -concurrency "$c" \
				-duration "$DURATION" -ceiling -progress off >"$work/report.json"
			kill "$daemon_pid" && wait "$daemon_pid" || true
			daemon_pid=
			rm -rf "$data"
			read -r creates health errors < <(jq -r '[.workload.per_second, .ceiling.per_second, .errors] | @tsv' "$work/report.json")
			if [[ $errors != 0 ]]; then echo "$build: $errors calls failed" >&2; exit 1; fi
			printf '%-28s %8d %12.0f %12.0f %10.2f %14.2f\n' "$(basename "$build")" "$c" "$creates" "$health" \
				"$(echo "$creates / $pg_tps" | bc -l)" "$(echo "$creates / $health" | bc -l)"
		done
	done
fi

if [[ " $PARTS " == *" purge "* ]]; then
	if [[ -z $pg_started ]]; then
		as_postgres "$pgbin/pg_ctl" -D "$work/pg" -l "$work/sock/pg.log" -w \
			-o "-p $PG_PORT -k $work/sock -c listen_addresses='' -c max_connections=100" start >/dev/null
		pg_started=1
	fi
	printf '\n%-28s %8s %10s %12s %10s\n' purge cameras seconds rows/s "vs pg"
	declare -A pg_rate
	for cams in 40 4000; do
		"${psql[@]}" -d bench >/dev/null <<SQL
drop table if exists purge_images;
create table purge_images (like single_image_metadata including all);
insert into purge_images select 'cam-' || (i % $cams), timestamptz '2026-01-01' + i * interval '300 milliseconds',
  'https://images.example/cam-' || (i % $cams) || '/' || i || '.jpg', 'image/jpeg', 350000, 1920, 1080, null
  from generate_series(0, 199999) i;
insert into purge_images select 'cam-' || c, timestamptz '2026-03-01' + c * interval '1 millisecond',
  'https://images.example/cam-' || c || '/recent.jpg', 'image/jpeg', 350000, 1920, 1080, null
  from generate_series(0, $cams - 1) c;
vacuum analyze purge_images;
checkpoint;
SQL
		ms=$("${psql[@]}" -d bench -c '\timing on' -c "delete from purge_images where captured_at < timestamptz '2026-02-01'" |
			awk '/^Time: / {print $2; exit}')
		pg_rate[$cams]=$(echo "200000 / ($ms / 1000)" | bc -l)
		printf '%-28s %8d %10.3f %12.0f %10s\n' "postgresql 15 DELETE" "$cams" "$(echo "$ms / 1000" | bc -l)" "${pg_rate[$cams]}" 1.00
	done
	as_postgres "$pgbin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null
	pg_started=
	for build in "${builds[@]}"; do
		test_bin=$build/retention.test
		if [[ ! -x $test_bin ]]; then echo "$build: no retention.test; skipping its purge" >&2; continue; fi
		for cams in 40 4000; do
			rate=$(cd "$root/store/retention" && "$test_bin" -test.run '^$' -test.bench "BenchmarkPurgeAgainstPostgres/cameras=$cams\$" \
				-test.benchtime 1x -test.timeout 30m | awk '/^Benchmark/ {for (i = 1; i < NF; i++) if ($(i+1) == "rows/s") print $i}')
			printf '%-28s %8d %10.3f %12.0f %10.2f\n' "$(basename "$build") purge" "$cams" "$(echo "200000 / $rate" | bc -l)" "$rate" \
				"$(echo "$rate / ${pg_rate[$cams]}" | bc -l)"
		done
	done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

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
# each figure and its ratio to PostgreSQL, with the CPU microseconds per
# create of the load tool and of the daemon (both share this machine), and
# removes everything it made.
#
# Then purges, in three cases: 200,000 expired rows over 40 cameras, 200,000
# over 4,000 and 100,000 over 10,000, each case's rows spread evenly over
# 1,000 minutes a month before one recent row per camera, kept. PostgreSQL
# gets each case loaded into a table of the same shape (autovacuum off on it),
# then VACUUM ANALYZE and CHECKPOINT (settled data, as rows a month old are);
# psql times DELETE ... WHERE captured_at < cutoff and then, right after it
# in the same session, a VACUUM of the table: "DEL+VAC" is the sum of the two
# (so the DELETE figure is that run's own). The rows each DELETE reports must
# be the case's expired rows and the rows left its cameras, or the script
# fails. Metadatad's figure is BenchmarkPurgeAgainstPostgres in
# store/retention (from the time the job starts to its end) on its embedded
# store, subtests rows=R/cameras=C/settled (rows flushed and compacted first)
# and rows=R/cameras=C/memtable (rows still in the memtable), at
# -test.benchtime 1x. Each figure is the median of PURGE_RUNS runs (a fresh
# load each). It prints one table of seconds per case and build, and the
# ratios of PostgreSQL's DELETE seconds to metadatad's (above 1: metadatad is
# faster).
#
# usage: bench/postgres-compare.sh [BUILD_DIR ...]
#   BUILD_DIR holds metadatad and metadata-load binaries (and retention.test,
#   `go test -c ./store/retention`, for the purge; without it, the build's
#   purge columns show "-"); give two (before, after) to compare builds in
#   one run. Without one, it builds this tree.
# environment: DURATION (default 20s) per measurement; PG_CLIENTS (16);
#   CLIENTS ("16 64"); LOG_LEVEL of the daemon (info: one line per call);
#   PARTS ("creates purge thin") to run some parts only; PURGE_RUNS (3) runs
#   per purge and thinning figure, the median taken; THIN_CAMERAS (100) and
#   THIN_DAYS (7), the thinning part's layout.
#
# Then thinning (issue 25): one row a minute of THIN_CAMERAS cameras over
# THIN_DAYS days, all but the last day thinned to the first row of each
# (camera, 15-minute interval). PostgreSQL deletes the others with one
# DELETE ... USING a row_number() window over date_bin('15 minutes'); its
# count must be exactly the rows a thinning deletes. Metadatad's figure is
# BenchmarkThinning (store/retention), a purge with policies under a
# default policy of one tier, on the same layout, settled first on both
# sides. Printed as rows deleted per second and their ratio.
set -euo pipefail

DURATION=${DURATION:-20s}
PG_CLIENTS=${PG_CLIENTS:-16}
CLIENTS=${CLIENTS:-16 64}
PARTS=${PARTS:-creates purge thin}
THIN_CAMERAS=${THIN_CAMERAS:-100}
THIN_DAYS=${THIN_DAYS:-7}
PURGE_RUNS=${PURGE_RUNS:-3}
LOG_LEVEL=${LOG_LEVEL:-info}
PG_PORT=${PG_PORT:-55432}
GRPC_PORT=${GRPC_PORT:-50971}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/postgres-compare.XXXXXX)
# shellcheck source=bench/lib/pg.sh
source "$root/bench/lib/pg.sh"
bench_init

builds=("$@")
if [[ ${#builds[@]} == 0 ]]; then
	mkdir -p "$work/build"
	(cd "$root" && go build -o "$work/build/" ./cmd/metadatad ./cmd/metadata-load &&
		go test -c -o "$work/build/retention.test" ./store/retention)
	builds=("$work/build")
fi

echo "machine: $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# PostgreSQL: durable by default (fsync, synchronous_commit, full_page_writes on).
init_pg
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
	stop_pg
	printf 'postgresql 15, pgbench %d clients: %.0f inserts/s (%s rows)\n' "$PG_CLIENTS" "$pg_tps" "$rows"

	# client and server us/create: each process's CPU time (user and system)
	# over the creates, as the load tool reports it ("-" from a tool too old to).
	printf '\n%-28s %8s %12s %12s %10s %14s %10s %10s\n' build clients creates/s health/s "vs pg" "vs health" \
		"client us" "server us"
	for build in "${builds[@]}"; do
		for c in $CLIENTS; do
			data="$work/data-$c"
			"$build/metadatad" -listen "127.0.0.1:$GRPC_PORT" -data-dir "$data" -log-level "$LOG_LEVEL" 2>"$work/daemon.log" &
			daemon_pid=$!
			wait_daemon "127.0.0.1:$GRPC_PORT" "$build/metadata-load"
			"$build/metadata-load" bench -addr "127.0.0.1:$GRPC_PORT" -types single -mix create=1 -concurrency "$c" \
				-duration "$DURATION" -ceiling -progress off >"$work/report.json"
			kill "$daemon_pid" && wait "$daemon_pid" || true
			daemon_pid=
			rm -rf "$data"
			read -r creates health errors client_us server_us < <(jq -r '[.workload.per_second, .ceiling.per_second, .errors,
				(.workload.cpu.client_us_per_call // "-"), (.workload.cpu.server_us_per_call // "-")] | @tsv' "$work/report.json")
			if [[ $errors != 0 ]]; then echo "$build: $errors calls failed" >&2; exit 1; fi
			printf '%-28s %8d %12.0f %12.0f %10.2f %14.2f %10s %10s\n' "$(basename "$build")" "$c" "$creates" "$health" \
				"$(echo "$creates / $pg_tps" | bc -l)" "$(echo "$creates / $health" | bc -l)" "$client_us" "$server_us"
		done
	done
fi

if [[ " $PARTS " == *" purge "* ]]; then
	if ! [[ $PURGE_RUNS =~ ^[1-9][0-9]*$ ]]; then echo "PURGE_RUNS must be a positive integer, not \"$PURGE_RUNS\"" >&2; exit 1; fi
	start_pg
	# expired rows:cameras, as BenchmarkPurgeAgainstPostgres's subtests.
	purge_cases=(200000:40 200000:4000 100000:10000)
	# psql without -q: it prints DELETE's row count.
	psql_tags=(as_postgres psql -X -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -d bench)
	declare -A pg_delete pg_vacuum
	for c in "${purge_cases[@]}"; do
		rows=${c%:*} cams=${c#*:}
		step_us=$((60000000000 / rows)) # 1,000 minutes over the expired rows
		deletes=() sums=()
		for _ in $(seq "$PURGE_RUNS"); do
			"${psql[@]}" -d bench >/dev/null <<SQL
set client_min_messages = warning;
drop table if exists purge_images;
create table purge_images (like single_image_metadata including all) with (autovacuum_enabled = off);
insert into purge_images select 'cam-' || lpad((i % $cams)::text, 5, '0'), timestamptz '2026-01-01' + i * interval '$step_us microseconds',
  'https://images.example/cam-' || (i % $cams) || '/' || i || '.jpg', 'image/jpeg', 350000, 1920, 1080, null
  from generate_series(0, $rows - 1) i;
insert into purge_images select 'cam-' || lpad(c::text, 5, '0'), timestamptz '2026-03-01' + c * interval '1 millisecond',
  'https://images.example/cam-' || c || '/recent.jpg', 'image/jpeg', 350000, 1920, 1080, null
  from generate_series(0, $cams - 1) c;
vacuum analyze purge_images;
checkpoint;
SQL
			out=$("${psql_tags[@]}" -c '\timing on' -c "delete from purge_images where captured_at < timestamptz '2026-02-01'" \
				-c 'vacuum purge_images')
			read -r deleted delete_ms vacuum_ms < <(awk '/^DELETE [0-9]+$/ {n = $2} /^Time: / {t[++k] = $2}
				END {print (n == "" ? "none" : n), (k >= 1 ? t[1] : "none"), (k >= 2 ? t[2] : "none")}' <<<"$out")
			if [[ $deleted != "$rows" || $delete_ms == none || $vacuum_ms == none ]]; then
				printf 'postgresql, %d rows over %d cameras: DELETE removed %s rows, want %d; psql said:\n%s\n' \
					"$rows" "$cams" "$deleted" "$rows" "$out" >&2
				exit 1
			fi
			left=$("${psql[@]}" -d bench -At -c "select count(*) from purge_images")
			if [[ $left != "$cams" ]]; then
				echo "postgresql, $rows rows over $cams cameras: $left rows left after the purge, want $cams" >&2
				exit 1
			fi
			deletes+=("$(echo "$delete_ms / 1000" | bc -l)")
			sums+=("$(echo "($delete_ms + $vacuum_ms) / 1000" | bc -l)")
		done
		pg_delete[$c]=$(median "${deletes[@]}")
		pg_vacuum[$c]=$(median "${sums[@]}")
	done
	"${psql[@]}" -d bench -c "drop table purge_images" >/dev/null
	stop_pg

	# seconds to 3 decimals, ratio to 2; "-" stays "-".
	secs() { if [[ $1 == - ]]; then echo -; else printf '%.3f' "$1"; fi; }
	ratio() { if [[ $2 == - ]]; then echo -; else printf '%.2f' "$(echo "$1 / $2" | bc -l)"; fi; }
	printf '\npurge: seconds, median of %d runs; DEL+VAC is DELETE, then VACUUM of the table right after it, summed;\n' "$PURGE_RUNS"
	printf '"x" is PostgreSQL DELETE seconds / metadatad seconds (above 1: metadatad is faster)\n'
	printf '%-20s %7s %7s %10s %10s %10s %10s %10s %10s\n' build rows cameras "pg DELETE" "pg DEL+VAC" settled memtable \
		"settled x" "memtable x"
	for build in "${builds[@]}"; do
		test_bin=$build/retention.test
		if [[ ! -x $test_bin ]]; then echo "$build: no retention.test; skipping its purge" >&2; fi
		for c in "${purge_cases[@]}"; do
			rows=${c%:*} cams=${c#*:}
			settled=- memtable=-
			for mode in settled memtable; do
				if [[ ! -x $test_bin ]]; then continue; fi
				name=BenchmarkPurgeAgainstPostgres/rows=$rows/cameras=$cams/$mode
				if ! out=$(cd "$root/store/retention" && "$test_bin" -test.run '^$' \
					-test.bench "^BenchmarkPurgeAgainstPostgres\$/^rows=$rows\$/^cameras=$cams\$/^$mode\$" \
					-test.benchtime 1x -test.count "$PURGE_RUNS" -test.timeout 30m 2>&1); then
					printf '%s: %s failed:\n%s\n' "$build" "$name" "$out" >&2
					exit 1
				fi
				mapfile -t rates < <(awk '/^Benchmark/ {for (i = 1; i < NF; i++) if ($(i+1) == "rows/s") print $i}' <<<"$out")
				if [[ ${#rates[@]} == 0 ]]; then echo "$build: no rows/s from $name; is it this build's benchmark?" >&2; continue; fi
				if [[ ${#rates[@]} != "$PURGE_RUNS" ]]; then echo "$build: $name: ${#rates[@]} runs, want $PURGE_RUNS" >&2; exit 1; fi
				s=$(echo "$rows / $(median "${rates[@]}")" | bc -l)
				if [[ $mode == settled ]]; then settled=$s; else memtable=$s; fi
			done
			printf '%-20s %7d %7d %10s %10s %10s %10s %10s %10s\n' "$(basename "$build")" "$rows" "$cams" \
				"$(secs "${pg_delete[$c]}")" "$(secs "${pg_vacuum[$c]}")" "$(secs "$settled")" "$(secs "$memtable")" \
				"$(ratio "${pg_delete[$c]}" "$settled")" "$(ratio "${pg_delete[$c]}" "$memtable")"
		done
	done
fi
if [[ " $PARTS " == *" thin "* ]]; then
	start_pg
	psql_tags=(as_postgres psql -X -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -d bench)
	per_camera=$((THIN_DAYS * 1440))
	want=$((THIN_CAMERAS * (THIN_DAYS - 1) * 1440 * 14 / 15))
	pg_rates=()
	for _ in $(seq "$PURGE_RUNS"); do
		"${psql[@]}" -d bench >/dev/null <<SQL
set client_min_messages = warning;
drop table if exists thin_images;
create table thin_images (like single_image_metadata including all) with (autovacuum_enabled = off);
insert into thin_images select 'cam-' || lpad((i / $per_camera)::text, 5, '0'), timestamptz '2026-01-01' + (i % $per_camera) * interval '1 minute',
  'https://images.example/cam-' || (i / $per_camera) || '/' || i || '.jpg', 'image/jpeg', 350000, 1920, 1080, null
  from generate_series(0, $THIN_CAMERAS * $per_camera - 1) i;
vacuum analyze thin_images;
checkpoint;
SQL
		out=$("${psql_tags[@]}" -c '\timing on' -c "delete from thin_images t using (
			select camera_id, captured_at, row_number() over (partition by camera_id,
				date_bin('15 minutes', captured_at, timestamptz '2026-01-01') order by captured_at) as n
			from thin_images where captured_at < timestamptz '2026-01-01' + interval '$((THIN_DAYS - 1)) days') d
			where t.camera_id = d.camera_id and t.captured_at = d.captured_at and d.n > 1")
		read -r deleted delete_ms < <(awk '/^DELETE [0-9]+$/ {n = $2} /^Time: / {t = $2}
			END {print (n == "" ? "none" : n), (t == "" ? "none" : t)}' <<<"$out")
		if [[ $deleted != "$want" || $delete_ms == none ]]; then
			printf 'postgresql thinning: DELETE removed %s rows, want %d; psql said:\n%s\n' "$deleted" "$want" "$out" >&2
			exit 1
		fi
		pg_rates+=("$(echo "$deleted / ($delete_ms / 1000)" | bc -l)")
	done
	"${psql[@]}" -d bench -c "drop table thin_images" >/dev/null
	stop_pg
	pg_rate=$(median "${pg_rates[@]}")
	printf '\nthinning %d cameras x %d days of one row a minute to one per 15 minutes past a day (%d rows deleted):\n' \
		"$THIN_CAMERAS" "$THIN_DAYS" "$want"
	printf 'rows deleted per second, median of %d runs; "x" is metadatad / PostgreSQL (above 1: metadatad is faster)\n' "$PURGE_RUNS"
	printf '%-20s %12s %12s %8s\n' build "pg DELETE" metadatad x
	for build in "${builds[@]}"; do
		test_bin=$build/retention.test
		if [[ ! -x $test_bin ]]; then echo "$build: no retention.test; skipping its thinning" >&2; continue; fi
		if ! out=$(cd "$root/store/retention" && THIN_CAMERAS=$THIN_CAMERAS THIN_DAYS=$THIN_DAYS "$test_bin" -test.run '^$' \
			-test.bench '^BenchmarkThinning$' -test.benchtime 1x -test.count "$PURGE_RUNS" -test.timeout 30m 2>&1); then
			printf '%s: BenchmarkThinning failed:\n%s\n' "$build" "$out" >&2
			exit 1
		fi
		mapfile -t rates < <(awk '/^BenchmarkThinning/ {for (i = 1; i < NF; i++) if ($(i+1) == "rows/s") print $i}' <<<"$out")
		if [[ ${#rates[@]} == 0 ]]; then echo "$build: no rows/s from BenchmarkThinning; is it this build's benchmark?" >&2; continue; fi
		md_rate=$(median "${rates[@]}")
		printf '%-20s %12.0f %12.0f %8.2f\n' "$(basename "$build")" "$pg_rate" "$md_rate" "$(echo "$md_rate / $pg_rate" | bc -l)"
	done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

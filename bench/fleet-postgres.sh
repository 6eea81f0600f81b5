#!/usr/bin/env bash
# fleet-postgres.sh: the fleet at a moment (issue 45) against PostgreSQL 15,
# in one run, as a ratio.
#
# It starts a throwaway PostgreSQL 15 cluster (installing Debian's package if
# missing) in a temporary directory, loads 10 minutes of 10,000 cameras (an
# image each per minute, 100,000 rows) into a table of the image table's shape
# (a primary key on camera and capture time, an index on capture time),
# VACUUM ANALYZE and CHECKPOINT, and times with pgbench (one client) the read
# of every row of minute 5:
#   SELECT * FROM single_image_metadata WHERE captured_at >= $1 AND captured_at < $2
# Then BenchmarkMoment (store/fleet) reads the same minute of the same layout
# from the embedded store, whole images in pages of 1,000, and
# BenchmarkListFleetImages (server) reads it as a client does, through
# ListFleetImages over TCP on 127.0.0.1 (as pgbench reads PostgreSQL's
# rows through its protocol), then PostgreSQL again; PostgreSQL's figure is
# the mean of its two runs, so load drift on a shared machine falls on both
# sides. It prints milliseconds per read of the minute and the ratios
# PostgreSQL / metadatad (above 1: metadatad is faster), and removes
# everything it made.
#
# usage: bench/fleet-postgres.sh
# environment: PG_PORT (55491); READS (50) per measurement.
set -euo pipefail

PG_PORT=${PG_PORT:-55491}
READS=${READS:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/fleet-postgres.XXXXXX)
# shellcheck source=bench/lib/pg.sh
source "$root/bench/lib/pg.sh"
bench_init

echo "machine: $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
init_pg
psql=(as_postgres psql -q -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -c "create database bench" >/dev/null
# The rows of BenchmarkMoment: camera c's image of minute m at m minutes and c milliseconds.
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
insert into single_image_metadata
select 'cam-' || lpad(c::text, 6, '0'), t, 'https://blobs.example/cam-' || lpad(c::text, 6, '0') || '/' || extract(epoch from t)::bigint || '.jpg',
       'image/jpeg', 345678, 1920, 1080, '{"site":"north"}'
from generate_series(0, 9) m, generate_series(0, 9999) c,
     lateral (select timestamptz '2026-01-01 00:00:00+00' + m * interval '1 minute' + c * interval '1 millisecond') as x(t);
vacuum analyze single_image_metadata;
checkpoint;
SQL
rows=$("${psql[@]}" -d bench -At -c "select count(*) from single_image_metadata where captured_at >= '2026-01-01 00:05:00+00' and captured_at < '2026-01-01 00:06:00+00'")
[[ $rows == 10000 ]] || { echo "PostgreSQL's minute holds $rows rows, want 10000" >&2; exit 1; }
"${psql[@]}" -d bench -c "explain select * from single_image_metadata where captured_at >= '2026-01-01 00:05:00+00' and captured_at < '2026-01-01 00:06:00+00'"
cat > "$work/select.sql" <<'SQL'
select * from single_image_metadata where captured_at >= '2026-01-01 00:05:00+00' and captured_at < '2026-01-01 00:06:00+00';
SQL
chmod 644 "$work/select.sql"

pg_ms() {
	as_postgres "$pgbin/pgbench" -n -h "$work/sock" -p "$PG_PORT" -U postgres -c 1 -t "$READS" -f "$work/select.sql" bench 2>/dev/null |
		awk '/latency average/ {print $4}'
}

pg1=$(pg_ms)
go_ns=$(cd "$root" && go test -run '^$' -bench '^BenchmarkMoment$' -benchtime "${READS}x" ./store/fleet 2>/dev/null |
	awk '/^BenchmarkMoment/ {print $3}')
grpc_ns=$(cd "$root" && go test -run '^$' -bench '^BenchmarkListFleetImages$' -benchtime "${READS}x" ./server 2>/dev/null |
	awk '/^BenchmarkListFleetImages/ {print $3}')
pg2=$(pg_ms)
awk -v a="$pg1" -v b="$pg2" -v g="$go_ns" -v r="$grpc_ns" 'BEGIN {
	pg = (a + b) / 2; md = g / 1e6; rpc = r / 1e6
	printf "one minute of 10,000 cameras, read whole (ms per read): PostgreSQL %.2f (runs %.2f, %.2f)\n", pg, a, b
	printf "  metadatad, the store in process:         %.2f; PostgreSQL/metadatad %.2fx\n", md, pg / md
	printf "  metadatad, ListFleetImages over gRPC:    %.2f; PostgreSQL/metadatad %.2fx\n", rpc, pg / rpc
}'

#!/usr/bin/env bash
# camera-delete-compare.sh: deleting every image of one camera (issue 45,
# DeleteCameraImages) on metadatad's embedded store against PostgreSQL 15's
# DELETE ... WHERE camera_id = $1, in one run, as a ratio.
#
# The layout, on both sides: a camera with a year of one image a minute
# (525,600 images, from 2025-01-01) and 10 other cameras with a day of one a
# minute each (2025-06-01), kept. PostgreSQL gets it in a table of the image
# table's shape (bench/postgres-compare.sh's: a primary key on camera and
# capture time, one index on capture time), autovacuum off, then VACUUM
# ANALYZE and CHECKPOINT (settled data); psql times the DELETE and, right
# after it in the same session, a VACUUM of the table ("DEL+VAC" is their
# sum). The DELETE must report 525,600 rows and leave the others, or the
# script fails. Metadatad's figure is BenchmarkCameraDeleteAgainstPostgres in
# store/retention (from the job's start to its end, rows flushed and
# compacted first), without and with the outbox of deleted images, at
# -test.benchtime 1x. Each figure is the median of RUNS runs (a fresh load
# each); the two sides run alternately, so a machine whose load drifts
# weighs on both.
#
# usage: bench/camera-delete-compare.sh
# environment: RUNS (3); PG_PORT (55442), a port of its own.
set -euo pipefail

RUNS=${RUNS:-3}
PG_PORT=${PG_PORT:-55442}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/camera-delete-compare.XXXXXX)
# shellcheck source=bench/lib/pg.sh
source "$root/bench/lib/pg.sh"
bench_init

(cd "$root" && go test -c -o "$work/retention.test" ./store/retention)
echo "machine: $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

init_pg
psql=(as_postgres psql -q -X -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -c "create database bench" >/dev/null
# psql without -q: it prints DELETE's row count.
psql_tags=(as_postgres psql -X -h "$work/sock" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -d bench)

year=525600
kept=$((10 * 1440))
pg_del=() pg_delvac=() md=() md_outbox=()
for run in $(seq "$RUNS"); do
	"${psql[@]}" -d bench >/dev/null <<SQL
drop table if exists images;
create table images (
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
create index images_by_time on images (captured_at);
insert into images select 'cam-gone', timestamptz '2025-01-01 00:00:00+00' + i * interval '1 minute',
	'https://blobs.example/cam-gone/' || i || '.jpg', 'image/jpeg', 345678, 1920, 1080, null
	from generate_series(0, $year - 1) i;
insert into images select 'cam-kept-' || lpad(c::text, 2, '0'), timestamptz '2025-06-01 00:00:00+00' + i * interval '1 minute',
	'https://blobs.example/kept.jpg', 'image/jpeg', 345678, 1920, 1080, null
	from generate_series(0, 9) c, generate_series(0, 1439) i;
vacuum analyze images;
checkpoint;
SQL
	out=$("${psql_tags[@]}" -c '\timing on' -c "delete from images where camera_id = 'cam-gone'" -c 'vacuum images')
	deleted=$(awk '/^DELETE / {print $2}' <<<"$out")
	if [[ $deleted != "$year" ]]; then
		printf 'postgresql: DELETE removed %s rows, want %d; psql said:\n%s\n' "$deleted" "$year" "$out" >&2
		exit 1
	fi
	left=$("${psql[@]}" -d bench -At -c "select count(*) from images")
	if [[ $left != "$kept" ]]; then echo "postgresql: $left rows left, want $kept" >&2; exit 1; fi
	mapfile -t ms < <(awk '/^Time: / {print $2}' <<<"$out")
	pg_del+=("$(printf "%.3f" "$(bc -l <<<"${ms[0]} / 1000")")")
	pg_delvac+=("$(printf "%.3f" "$(bc -l <<<"(${ms[0]} + ${ms[1]}) / 1000")")")

	bench=$(cd "$root/store/retention" && "$work/retention.test" -test.run '^$' \
		-test.bench 'BenchmarkCameraDeleteAgainstPostgres' -test.benchtime 1x)
	md+=("$(awk '/outbox=false/ {print $3 / 1e9}' <<<"$bench")")
	md_outbox+=("$(awk '/outbox=true/ {print $3 / 1e9}' <<<"$bench")")
	echo "run $run: postgresql DELETE ${pg_del[-1]} s, DEL+VAC ${pg_delvac[-1]} s; metadatad ${md[-1]} s, with the outbox ${md_outbox[-1]} s" >&2
done

d=$(median "${pg_del[@]}") dv=$(median "${pg_delvac[@]}") m=$(median "${md[@]}") mo=$(median "${md_outbox[@]}")
printf '\ndeleting a camera of %d images (a year, one a minute), seconds, median of %d runs:\n' "$year" "$RUNS"
printf '  postgresql 15 DELETE ... WHERE camera_id = $1   %8.3f   (with the VACUUM after it: %.3f)\n' "$d" "$dv"
printf '  metadatad DeleteCameraImages (embedded)         %8.3f   ratio PG DELETE / metadatad: %.2f\n' "$m" "$(bc -l <<<"$d / $m")"
printf '  metadatad, with the outbox of deleted images    %8.3f   ratio PG DELETE / metadatad: %.2f\n' "$mo" "$(bc -l <<<"$d / $mo")"

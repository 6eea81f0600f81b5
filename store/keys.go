package store

import (
	"fmt"
	"strconv"
	"time"
)

// The .NET system's keys are built from DateTimeOffset ticks: 100 ns
// intervals since 0001-01-01T00:00:00Z. These codecs reproduce its keys byte
// for byte.
const (
	// MaxTicks is DateTimeOffset.MaxValue.Ticks, the end of 9999-12-31.
	MaxTicks int64 = 3155378975999999999
	// unixEpochTicks is the tick count of 1970-01-01T00:00:00Z.
	unixEpochTicks int64 = 621355968000000000
	ticksPerSecond int64 = 10_000_000
	rowKeyDigits         = 19
	// minuteLayout is the index partition key format: capture minute, UTC.
	minuteLayout = "200601021504"
)

// Ticks is t as .NET ticks, truncated to 100 ns.
func Ticks(t time.Time) int64 {
	return unixEpochTicks + t.Unix()*ticksPerSecond + int64(t.Nanosecond())/100
}

// TimeFromTicks is the UTC instant of a .NET tick count.
func TimeFromTicks(ticks int64) time.Time {
	ticks -= unixEpochTicks
	sec, rem := ticks/ticksPerSecond, ticks%ticksPerSecond
	if rem < 0 {
		sec, rem = sec-1, rem+ticksPerSecond
	}
	return time.Unix(sec, rem*100).UTC()
}

// TruncateToTicks drops what a tick cannot hold, so a stored time reads back equal.
func TruncateToTicks(t time.Time) time.Time { return TimeFromTicks(Ticks(t)) }

// InvertedTicksRowKey is the primary row key of an instant:
// MaxTicks - ticks, zero-padded to 19 digits, so that newer sorts first.
func InvertedTicksRowKey(t time.Time) string { return invertedKey(Ticks(t)) }

func invertedKey(ticks int64) string {
	return fmt.Sprintf("%0*d", rowKeyDigits, MaxTicks-ticks)
}

// TimeFromInvertedTicksRowKey decodes a row key made by InvertedTicksRowKey.
func TimeFromInvertedTicksRowKey(rowKey string) (time.Time, error) {
	if len(rowKey) != rowKeyDigits {
		return time.Time{}, fmt.Errorf("%w: row key %q is not %d digits", ErrInvalidKey, rowKey, rowKeyDigits)
	}
	inv, err := strconv.ParseUint(rowKey, 10, 64)
	if err != nil || inv > uint64(MaxTicks) {
		return time.Time{}, fmt.Errorf("%w: row key %q is not inverted ticks", ErrInvalidKey, rowKey)
	}
	return TimeFromTicks(MaxTicks - int64(inv)), nil
}

// InvertedTicksRows is the row-key range of the instants in [start, end)
// under InvertedTicksRowKey. A nil bound is open. Newest-first order means
// end gives the lower row key and start the upper.
func InvertedTicksRows(start, end *time.Time) Range {
	var r Range
	if end != nil {
		// captured < end  <=>  ticks <= ceil(end)-1
		r.From = invertedKey(ceilTicks(*end) - 1)
	}
	if start != nil {
		// captured >= start  <=>  ticks >= ceil(start); the bound is exclusive.
		r.To = fmt.Sprintf("%0*d", rowKeyDigits, MaxTicks-ceilTicks(*start)+1)
	}
	return r
}

func ceilTicks(t time.Time) int64 {
	ticks := Ticks(t)
	if t.Nanosecond()%100 != 0 {
		ticks++
	}
	return ticks
}

// MinutePartitionKey is the index partition key of an instant: its UTC
// minute as yyyyMMddHHmm.
func MinutePartitionKey(t time.Time) string { return t.UTC().Format(minuteLayout) }

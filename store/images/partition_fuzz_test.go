package images_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// FuzzIndexPartitionKey: an image's index partition is its capture minute,
// followed with several shards by _<n>, n below the shard count and the same
// for every call; it sorts within its minute, so that the partitions of the
// expired minutes stay one range whatever the shards.
func FuzzIndexPartitionKey(f *testing.F) {
	f.Add(int64(1767225720), "cam-1", 1)
	f.Add(int64(1767225720), "cam-1", 8)
	f.Add(int64(-11644473600), "", 1000)
	f.Add(int64(253402300799), "\u00e9\u20ac", 7)
	f.Fuzz(func(t *testing.T, unix int64, camera string, shards int) {
		at := time.Unix(unix%253402300800, 0).UTC()
		if at.Year() < 1601 {
			at = at.AddDate(1601-at.Year(), 0, 0)
		}
		shards = ((shards % 1001) + 1001) % 1001 // 0..1000, as Options.IndexShards
		pk := images.IndexPartitionKey(at, camera, shards)
		if again := images.IndexPartitionKey(at, camera, shards); again != pk {
			t.Fatalf("partition %q then %q for the same image", pk, again)
		}
		minute := store.MinutePartitionKey(at)
		next := store.MinutePartitionKey(at.Truncate(time.Minute).Add(time.Minute))
		if pk < minute || (next > minute && pk >= next) {
			t.Fatalf("partition %q sorts outside its minute [%q, %q)", pk, minute, next)
		}
		if shards <= 1 {
			if pk != minute {
				t.Fatalf("partition %q with %d shards, want %q", pk, shards, minute)
			}
			return
		}
		suffix, ok := strings.CutPrefix(pk, minute+"_")
		n, err := strconv.Atoi(suffix)
		if !ok || err != nil || n < 0 || n >= shards || strconv.Itoa(n) != suffix {
			t.Fatalf("partition %q is not %s_<n> with n below %d", pk, minute, shards)
		}
	})
}

package server

import (
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiters bounds the token buckets one keyedLimiters holds: at about
// 300 bytes a bucket, some 5 MB, however many principals or peer
// addresses call.
const maxLimiters = 1 << 14

// sweepEvery is how often a new key also forgets the buckets that have
// refilled, so that the set shrinks back after a crowd of callers left
// even while it is far from maxLimiters.
const sweepEvery = time.Minute

// keyedLimiters are token buckets by key: a principal, a peer address. The
// buckets are created on first use and forgotten once full: a bucket that
// has refilled to its burst limits exactly as a new one would, so
// forgetting it changes no caller's limit, and callers that come and go
// (200,000 JWT subjects in a day) leave nothing behind. Only when more
// than maxLimiters callers are in the middle of a burst at once are some
// of those forgotten too, which gives them a fresh burst rather than the
// set unbounded memory.
type keyedLimiters struct {
	limit rate.Limit
	burst int
	max   int

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

func newKeyedLimiters(perSecond float64, burst, maxBuckets int) *keyedLimiters {
	return &keyedLimiters{limit: rate.Limit(perSecond), burst: burst, max: maxBuckets, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token of key's bucket at now, creating the bucket if key
// has none, and reports whether there was one.
func (k *keyedLimiters) allow(key string, now time.Time) bool {
	k.mu.Lock()
	b, ok := k.buckets[key]
	if !ok {
		if len(k.buckets) >= k.max || now.Sub(k.lastSweep) >= sweepEvery {
			k.sweep(now)
		}
		b = rate.NewLimiter(k.limit, k.burst)
		k.buckets[key] = b
	}
	k.mu.Unlock()
	return b.AllowN(now, 1)
}

// exhausted reports whether key's bucket has no token at now; a key
// without a bucket has its whole burst.
func (k *keyedLimiters) exhausted(key string, now time.Time) bool {
	k.mu.Lock()
	b, ok := k.buckets[key]
	k.mu.Unlock()
	return ok && b.TokensAt(now) < 1
}

// sweep forgets the full buckets. If more than three quarters of max
// remain it forgets others down to that, first those with a token left,
// which limit no call now, and only then empty ones, whose callers are
// being held to their rate. The next forced sweep is then at least a
// quarter of max new keys away, so a flood of new keys costs a sweep's
// work only now and then.
func (k *keyedLimiters) sweep(now time.Time) {
	k.lastSweep = now
	k.forget(now, float64(k.burst), 0)
	keep := k.max * 3 / 4
	k.forget(now, 1, keep)
	k.forget(now, math.Inf(-1), keep)
}

// forget drops buckets holding at least least tokens at now until no more
// than keep remain.
func (k *keyedLimiters) forget(now time.Time, least float64, keep int) {
	for key, b := range k.buckets {
		if len(k.buckets) <= keep {
			return
		}
		if b.TokensAt(now) >= least {
			delete(k.buckets, key)
		}
	}
}

// size is the number of buckets held.
func (k *keyedLimiters) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// peerKey names the caller's address for the peer limit: its IP without
// the port, which changes with every connection, and for IPv6 its /64,
// the least a single host or network is given, so that walking the
// addresses of one prefix does not make a new peer each time.
func peerKey(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

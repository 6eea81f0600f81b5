package main

import (
	"flag"
	"time"

	"github.com/metadatad/metadatad/server"
)

// limitsConfig bounds what callers can ask of the server; see server.Limits.
type limitsConfig struct {
	maxRequestBytes      int
	maxConcurrentStreams uint
	maxConnectionAge     time.Duration
	defaultDeadline      time.Duration
	rate                 float64
	burst                int
	maxInFlight          int
	maxWatches           int
	maxFeeds             int
	maxDeletedWatches    int
}

func (l *limitsConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&l.maxRequestBytes, "max-request-bytes", 4<<20, "largest request message accepted; larger ones are RESOURCE_EXHAUSTED")
	fs.UintVar(&l.maxConcurrentStreams, "max-concurrent-streams", 256, "calls one connection may have open at once")
	fs.DurationVar(&l.maxConnectionAge, "max-connection-age", 30*time.Minute, "close connections this old (after their calls) so clients reconnect, meeting renewed certificates and new replicas")
	fs.DurationVar(&l.defaultDeadline, "default-deadline", time.Minute, "deadline of a unary call whose client set none")
	fs.Float64Var(&l.rate, "rate-limit", 0, "calls per second each principal may make, beyond which calls are RESOURCE_EXHAUSTED; also the failed authentications per second a peer address may cause before its calls are refused unchecked (0: no limit)")
	fs.IntVar(&l.burst, "rate-burst", 0, "with -rate-limit: the burst a principal may make at once (default the rate, at least 1)")
	fs.IntVar(&l.maxInFlight, "max-in-flight", 1024, "calls the server runs at once; one more is RESOURCE_EXHAUSTED instead of queued")
	fs.IntVar(&l.maxWatches, "max-watches", 64, "WatchPurge streams open at once")
	fs.IntVar(&l.maxFeeds, "max-feeds", 256, "live image feeds (Watch*ImageMetadata streams) open at once")
	fs.IntVar(&l.maxDeletedWatches, "max-deleted-image-watches", 16, "WatchDeletedImages streams open at once")
}

func (l limitsConfig) server() server.Limits {
	return server.Limits{
		MaxRequestBytes: l.maxRequestBytes, MaxConcurrentStreams: uint32(l.maxConcurrentStreams),
		MaxConnectionAge: l.maxConnectionAge, DefaultDeadline: l.defaultDeadline,
		Rate: l.rate, Burst: l.burst, MaxInFlight: l.maxInFlight, MaxWatches: l.maxWatches,
		MaxFeeds: l.maxFeeds, MaxDeletedImageWatches: l.maxDeletedWatches,
	}
}

package aztable

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// etagPrefix and etagSuffix frame the ETag Azure Table Storage gives an
// entity: W/"datetime'<Timestamp, URL-escaped>'".
const (
	etagPrefix = `W/"datetime'`
	etagSuffix = `'"`
)

// clock stamps the entities a write left with the service's time, and
// accounts for the writes whose answer did not tell it exactly. Callers
// rely on a write's Timestamp being the service's clock (retention's sweep
// safety compares it with the Timestamps of other rows), so a fallback is
// logged once per cause and counted (Backend.ClockFallbacks).
type clock struct {
	log         *slog.Logger
	date, local atomic.Uint64
	// warnDate and warnLocal log the first fallback of each cause.
	warnDate, warnLocal sync.Once
}

// writeTime is the Timestamp of the entity a write left. Writes other than
// inserts answer 204 without the entity, but Azure Table Storage's ETag
// carries the Timestamp exactly; other services' ETags do not (Cosmos DB's
// are opaque), and then the answer's Date header, to the second, stands
// in; without one, this process's clock does.
func (c *clock) writeTime(etag string, resp *http.Response) time.Time {
	if s, ok := strings.CutPrefix(etag, etagPrefix); ok {
		if s, ok = strings.CutSuffix(s, etagSuffix); ok {
			if s, err := url.QueryUnescape(s); err == nil {
				if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
					return t.UTC()
				}
			}
		}
	}
	if resp != nil {
		if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			c.date.Add(1)
			c.warnDate.Do(func() {
				c.log.Warn("aztable: a write's ETag carries no time; its Timestamp is the answer's Date header, to the second. "+
					"Further ones are counted in metadatad_azure_clock_fallback_total", "source", "date", "etag", etag)
			})
			return t.UTC()
		}
	}
	c.local.Add(1)
	c.warnLocal.Do(func() {
		c.log.Warn("aztable: a write's answer carries no time in its ETag or Date header; its Timestamp is this process's clock, "+
			"which may disagree with the service's. Further ones are counted in metadatad_azure_clock_fallback_total", "source", "local", "etag", etag)
	})
	return time.Now().UTC()
}

// ClockFallbacks counts the writes whose Timestamp did not come from the
// ETag, as the service stamped the entity: date those timed by the
// answer's Date header (to the second), local those timed by this
// process's clock.
func (b *Backend) ClockFallbacks() (date, local uint64) {
	return b.clock.date.Load(), b.clock.local.Load()
}

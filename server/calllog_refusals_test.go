package server_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/server/auth"
)

// TestRefusalLogsAreRateLimited: a flood of refused calls through the real
// interceptor chain (bad tokens, which the peer's budget of failures turns
// into RESOURCE_EXHAUSTED, and a scope missing) writes a bounded number of
// lines per code, and the next line of each code once the rate allows says
// how many went unlogged, so that lines and counts add up to every call.
// Time is the bubble's, so the flood takes no time and the wait none.
func TestRefusalLogsAreRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startServerOpts(t, openMemPebble(t), serverOpts{
			auth:   newTokenAuth(t, onlyToken(auth.ScopeRead)+",reader,"+auth.ScopeRead),
			limits: server.Limits{Rate: 1, Burst: 1},
		})
		const flood = 2000
		calls := map[codes.Code]int{}
		// The reader's calls first: once the bad tokens have emptied the
		// peer's budget, every call of the peer is RESOURCE_EXHAUSTED.
		tokens := []string{onlyToken(auth.ScopeRead), "guessed"}
		refuse := func(token string) {
			_, err := h.retention.ListPurges(bearer(t.Context(), token), &metadatav1.ListPurgesRequest{})
			calls[status.Code(err)]++
		}
		start := time.Now()
		for _, token := range tokens {
			for range flood {
				refuse(token)
			}
		}
		elapsed := time.Since(start)
		if calls[codes.Unauthenticated] != 1 || calls[codes.ResourceExhausted] != flood-1 || calls[codes.PermissionDenied] != flood {
			t.Fatalf("calls by code %v, want 1 UNAUTHENTICATED, then RESOURCE_EXHAUSTED, and %d PERMISSION_DENIED", calls, flood)
		}
		lines := refusalLines(h.logs.String())
		for _, code := range []codes.Code{codes.ResourceExhausted, codes.PermissionDenied} {
			// The burst of 20 lines, and one a second after it.
			if most := 20 + int(elapsed/time.Second) + 1; len(lines[code]) > most {
				t.Errorf("%d lines of %d calls refused %v in %v, want at most %d", len(lines[code]), calls[code], code, elapsed, most)
			}
		}
		// A minute later, one more of each: its line says how many of its
		// code were left out.
		time.Sleep(time.Minute)
		for _, token := range tokens {
			refuse(token)
		}
		refuse("guessed")
		lines = refusalLines(h.logs.String())
		for _, code := range []codes.Code{codes.Unauthenticated, codes.ResourceExhausted, codes.PermissionDenied} {
			logged, unlogged := len(lines[code]), 0
			for _, n := range lines[code] {
				unlogged += n
			}
			if logged+unlogged != calls[code] {
				t.Errorf("%v: %d lines saying %d unlogged, want them to add up to its %d calls", code, logged, unlogged, calls[code])
			}
			if code != codes.Unauthenticated && unlogged == 0 {
				t.Errorf("%v: no line says how many of its calls went unlogged", code)
			}
		}
	})
}

var (
	lineCode     = regexp.MustCompile(`grpc\.code=(\w+)`)
	lineUnlogged = regexp.MustCompile(`refusals_unlogged=(\d+)`)
)

// refusalLines reads the call lines of logs by code: for each line, the
// refusals its refusals_unlogged says were left out before it.
func refusalLines(logs string) map[codes.Code][]int {
	byName := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		byName[c.String()] = c
	}
	out := map[codes.Code][]int{}
	for line := range strings.Lines(logs) {
		if !strings.Contains(line, `msg="finished call"`) {
			continue
		}
		m := lineCode.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n := 0
		if u := lineUnlogged.FindStringSubmatch(line); u != nil {
			n, _ = strconv.Atoi(u[1])
		}
		out[byName[m[1]]] = append(out[byName[m[1]]], n)
	}
	return out
}

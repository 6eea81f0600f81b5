package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"time"
)

// report is the JSON the tool prints when it ends. Latencies are in
// milliseconds, rates in calls per second, ratios plain numbers.
type report struct {
	Mode      string       `json:"mode"`
	Target    string       `json:"target"`
	StartedAt time.Time    `json:"started_at"`
	Config    reportConfig `json:"config"`
	// Seed is the history written before the workload (or the seed mode's work).
	Seed *phaseReport `json:"seed,omitempty"`
	// Ceiling is health checks alone at the workload's concurrency.
	Ceiling  *phaseReport `json:"ceiling,omitempty"`
	Workload *phaseReport `json:"workload,omitempty"`
	// Ratios compare the workload with the ceiling: throughput_vs_health
	// is the workload's calls per second over the health checks', and
	// <rpc>_p50_vs_health, <rpc>_p99_vs_health the latencies.
	Ratios  map[string]float64 `json:"ratios,omitempty"`
	History []historyStep      `json:"history,omitempty"`
	Purge   *purgeReport       `json:"purge,omitempty"`
	RSS     *rssReport         `json:"server_rss,omitempty"`
	// Errors counts every failed call of the run, seeding included.
	Errors int64 `json:"errors"`
}

type reportConfig struct {
	Cameras            int            `json:"cameras"`
	Types              []string       `json:"types"`
	Mix                map[string]int `json:"mix"`
	Concurrency        int            `json:"concurrency"`
	Rate               float64        `json:"rate,omitempty"`
	DurationSeconds    float64        `json:"duration_seconds,omitempty"`
	Ops                int64          `json:"ops,omitempty"`
	Days               int            `json:"days,omitempty"`
	PurgeCameras       int            `json:"purge_cameras,omitempty"`
	MinSpanSeconds     float64        `json:"min_span_seconds,omitempty"`
	SeedIntervalSecond float64        `json:"seed_interval_seconds,omitempty"`
	Conns              int            `json:"conns"`
	TLS                bool           `json:"tls"`
	Token              bool           `json:"token"`
}

// phaseReport is what one phase measured.
type phaseReport struct {
	Seconds      float64              `json:"seconds"`
	Calls        int64                `json:"calls"`
	Errors       int64                `json:"errors"`
	PerSecond    float64              `json:"per_second"`
	ErrorsByCode map[string]int64     `json:"errors_by_code,omitempty"`
	RPCs         map[string]rpcReport `json:"rpcs"`
	// CPU is what the phase cost the tool and the server in CPU time.
	CPU *cpuReport `json:"cpu,omitempty"`
}

// cpuReport is the CPU time (user and system) the tool spent over a phase
// and, when the server runs on this machine, the server's, each also per
// call of the phase: with -mix create=1, microseconds per create. A server
// in the tool's own process (the tests') is counted in both.
type cpuReport struct {
	ClientSeconds   float64 `json:"client_seconds"`
	ClientUsPerCall float64 `json:"client_us_per_call"`
	ServerPID       int     `json:"server_pid,omitempty"`
	ServerSeconds   float64 `json:"server_seconds,omitempty"`
	ServerUsPerCall float64 `json:"server_us_per_call,omitempty"`
}

// rpcReport is one RPC's figures; per_second counts successful calls.
type rpcReport struct {
	Calls        int64            `json:"calls"`
	Errors       int64            `json:"errors"`
	PerSecond    float64          `json:"per_second"`
	ErrorsByCode map[string]int64 `json:"errors_by_code,omitempty"`
	LatencyMs    latencyReport    `json:"latency_ms"`
}

type latencyReport struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

type historyStep struct {
	Days   int          `json:"days"`
	Images int64        `json:"images_per_camera"`
	Reads  *phaseReport `json:"reads"`
	// Ceiling and VsHealth are the health checks measured just before the
	// reads (with -ceiling) and the reads' latencies over theirs.
	Ceiling  *phaseReport       `json:"ceiling,omitempty"`
	VsHealth map[string]float64 `json:"vs_health,omitempty"`
	// P99VsFirst is each RPC's p99 over its p99 at the first step.
	P99VsFirst map[string]float64 `json:"p99_vs_first,omitempty"`
}

type purgeReport struct {
	JobID               string    `json:"job_id"`
	Cutoff              time.Time `json:"cutoff"`
	State               string    `json:"state"`
	Error               string    `json:"error,omitempty"`
	StartedAfterSeconds float64   `json:"started_after_seconds"`
	Seconds             float64   `json:"seconds"`
	DevicesTotal        int64     `json:"devices_total"`
	MetadataRowsDeleted int64     `json:"metadata_rows_deleted"`
	IndexRowsDeleted    int64     `json:"index_rows_deleted"`
	// Before, During and After split the workload's calls by when they started.
	Before *phaseReport `json:"before"`
	During *phaseReport `json:"during"`
	After  *phaseReport `json:"after,omitempty"`
	// P50Ratio and P99Ratio are each RPC's latency during the purge over before it.
	P50Ratio map[string]float64 `json:"p50_during_vs_before"`
	P99Ratio map[string]float64 `json:"p99_during_vs_before"`
	// JobSeconds is the job's own time, from its start_time to its
	// end_time as the server stamped them: Seconds without the wait for a
	// worker to take the job and the watch's delivery of its end.
	JobSeconds float64 `json:"job_seconds"`
	// Window compares windows of equal length (the purge's, at least
	// -min-span) from the purge's start and just before it.
	Window *windowReport `json:"window,omitempty"`
}

// windowReport compares the calls started in the purge's window (from its
// start, as long as the purge ran and at least -min-span) with the calls
// started in as long a window just before it.
type windowReport struct {
	SpanSeconds float64    `json:"span_seconds"`
	Before      windowSide `json:"before"`
	During      windowSide `json:"during"`
	// P99Ratio and P999Ratio are each RPC's tail (and "all" RPCs') during
	// over before.
	P99Ratio  map[string]float64 `json:"p99_during_vs_before"`
	P999Ratio map[string]float64 `json:"p999_during_vs_before"`
}

// windowSide is one window's calls: per RPC and, as "all", every RPC
// together.
type windowSide struct {
	// CoveredSeconds is how much of the window the workload ran in: less
	// than span_seconds when the run began after it opened or ended
	// before it closed.
	CoveredSeconds float64               `json:"covered_seconds"`
	RPCs           map[string]tailReport `json:"rpcs"`
}

// tailReport is the tail of one RPC's latencies in a window, in
// milliseconds; failed calls count in it as in the phases.
type tailReport struct {
	Calls  int64   `json:"calls"`
	Errors int64   `json:"errors"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p999"`
}

type rssReport struct {
	PID        int         `json:"pid"`
	Samples    []rssSample `json:"samples"`
	FirstBytes uint64      `json:"first_bytes"`
	MaxBytes   uint64      `json:"max_bytes"`
	LastBytes  uint64      `json:"last_bytes"`
}

type rssSample struct {
	Seconds float64 `json:"seconds"`
	Bytes   uint64  `json:"bytes"`
}

// summary turns a finished recorder into its report.
func (r *recorder) summary() *phaseReport {
	secs := r.elapsed().Seconds()
	p := &phaseReport{Seconds: round(secs), RPCs: map[string]rpcReport{}}
	for o, s := range r.ops {
		s.mu.Lock()
		rr := rpcReport{Calls: s.all.TotalCount(), LatencyMs: latencyReport{
			P50: ms(s.all.ValueAtQuantile(50)), P90: ms(s.all.ValueAtQuantile(90)),
			P99: ms(s.all.ValueAtQuantile(99)), Max: ms(s.all.Max()), Mean: round(s.all.Mean() / 1000),
		}}
		for code, n := range s.codes {
			if code.String() == "OK" {
				continue
			}
			if rr.ErrorsByCode == nil {
				rr.ErrorsByCode = map[string]int64{}
			}
			rr.ErrorsByCode[code.String()] += n
			rr.Errors += n
		}
		s.mu.Unlock()
		if rr.Calls == 0 {
			continue
		}
		rr.PerSecond = perSecond(rr.Calls-rr.Errors, secs)
		p.RPCs[string(o)] = rr
		p.Calls += rr.Calls
		p.Errors += rr.Errors
		for code, n := range rr.ErrorsByCode {
			if p.ErrorsByCode == nil {
				p.ErrorsByCode = map[string]int64{}
			}
			p.ErrorsByCode[code] += n
		}
	}
	p.PerSecond = perSecond(p.Calls-p.Errors, secs)
	return p
}

// latencyRatios divides each RPC's latency at quantile q in num by that of
// the same RPC in den (or of den's only RPC, for a ceiling), naming each
// ratio by the RPC and suffix.
func latencyRatios(num, den *phaseReport, pick func(latencyReport) float64, base string, suffix string, into map[string]float64) {
	for name, r := range num.RPCs {
		ref, ok := den.RPCs[name]
		if base != "" {
			ref, ok = den.RPCs[base]
		}
		if ok && pick(ref.LatencyMs) > 0 {
			into[name+suffix] = round(pick(r.LatencyMs) / pick(ref.LatencyMs))
		}
	}
}

func p50(l latencyReport) float64 { return l.P50 }
func p99(l latencyReport) float64 { return l.P99 }

func ms(us int64) float64 { return round(float64(us) / 1000) }

func perSecond(n int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return round(float64(n) / secs)
}

// round keeps three decimals, enough for milliseconds and ratios.
func round(f float64) float64 { return math.Round(f*1000) / 1000 }

func (r *report) write(path string, stdout io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

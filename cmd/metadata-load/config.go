package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/internal/grpcclient"
)

// modes are the tool's subcommands; bench is another name for run.
var modes = []string{"run", "bench", "seed", "history", "purge-during", "soak", "ceiling"}

// config is one invocation: the mode, how to reach the server, the fleet and
// the workload.
type config struct {
	mode   string
	client grpcclient.Config
	fleet  fleetConfig
	load   loadConfig

	// days of history seed writes per camera before the workload; 0 writes
	// only the fleet's first minute, so reads find every camera.
	days int
	// seedInterval is the simulated time between two seeded images of a camera.
	seedInterval time.Duration
	// seedConcurrency is how many creates seeding keeps in flight.
	seedConcurrency int
	// historyDays are the history depths the history mode measures at.
	historyDays []int
	// purgeAge: purge-during purges what is older than now minus this.
	purgeAge time.Duration
	// purgeFleet, when it has cameras, is a second fleet that holds the
	// seeded history, all of it older than purgeAge (the rows a purge
	// takes, every one), while the workload's fleet gets only its first
	// minute: a purge of a few cameras' many rows under the traffic of
	// many cameras.
	purgeFleet fleetConfig
	// minSpan is the shortest window purge-during compares: the calls
	// started in max(purge, minSpan) from the purge's start against those
	// started in as long just before it.
	minSpan time.Duration
	// skipSeed: purge-during writes nothing before its workload, as a seed
	// run with the same fleets did it already (and the server was, say,
	// compacted since).
	skipSeed bool
	// ceiling measures health checks at the workload's concurrency first.
	ceiling bool
	// serverPID is the server process whose CPU time is reported and whose
	// RSS is sampled; 0 finds the local process listening on the target
	// port, if any.
	serverPID   int
	rssInterval time.Duration
	// reportPath is where the JSON report goes; "-" is stdout.
	reportPath string
	// progress is auto (on when stderr is a terminal), on or off.
	progress string
	// conns is how many connections the tool's calls are spread over.
	conns int
	// cpuProfile, when set, is where the tool writes a CPU profile of
	// itself: on a machine it shares with the server, its own cost is
	// taken from the server's.
	cpuProfile string
}

// loadConfig is the shape of a measured workload.
type loadConfig struct {
	mix         mix
	concurrency int
	// rate caps calls per second across workers; 0 runs closed-loop at
	// the concurrency.
	rate float64
	// duration and ops bound the workload; whichever comes first ends it.
	duration time.Duration
	ops      int64
	// callTimeout bounds each call.
	callTimeout time.Duration
}

const usage = `usage: metadata-load MODE [flags]

modes: run (or bench), seed, history, purge-during, soak, ceiling
run "metadata-load MODE -h" for the flags`

func parseConfig(args []string, stderr io.Writer) (config, error) {
	if len(args) == 0 || !slices.Contains(modes, args[0]) {
		return config{}, errors.New(usage)
	}
	c := config{mode: args[0]}
	if c.mode == "bench" {
		c.mode = "run"
	}
	fs := flag.NewFlagSet("metadata-load "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.client.Addr, "addr", "localhost:50051", "metadatad address")
	c.client.RegisterFlags(fs)

	fs.IntVar(&c.fleet.cameras, "cameras", 1000, "cameras in the simulated fleet")
	fs.StringVar(&c.fleet.prefix, "camera-prefix", "load-cam-", "prefix of the fleet's camera ids; another prefix is another fleet")
	types := fs.String("types", "single,pano,pre-stitch", "image types each camera captures every minute")

	mixFlag := fs.String("mix", defaultMix, "weights of the calls in the workload: create, get-latest, batch-get-latest, list")
	fs.IntVar(&c.load.concurrency, "concurrency", 16, "calls in flight at once")
	fs.IntVar(&c.conns, "conns", 1, "connections to the server; workers are spread over them in turn")
	fs.Float64Var(&c.load.rate, "rate", 0, "calls per second across all workers (0: as fast as -concurrency allows)")
	fs.DurationVar(&c.load.duration, "duration", 30*time.Second, "how long the workload runs")
	fs.Int64Var(&c.load.ops, "ops", 0, "stop after this many calls (0: only -duration bounds the run)")
	fs.DurationVar(&c.load.callTimeout, "call-timeout", 10*time.Second, "deadline of each call")
	fs.IntVar(&c.fleet.batchSize, "batch-size", 200, "cameras per BatchGetLatest")
	fs.DurationVar(&c.fleet.listWindow, "list-window", time.Hour, "time range of each List")
	fs.IntVar(&c.fleet.listPageSize, "list-page-size", 100, "page size of each List")

	fs.IntVar(&c.days, "days", 0, "days of history to seed per camera before the workload (seed: required)")
	fs.DurationVar(&c.seedInterval, "seed-interval", time.Minute, "simulated time between two seeded images of a camera; above 1m seeds long histories faster")
	fs.IntVar(&c.seedConcurrency, "seed-concurrency", 64, "creates in flight while seeding")
	historyDays := fs.String("history-days", "1,7,30", "history mode: the history depths, in days, to measure reads at")
	fs.DurationVar(&c.purgeAge, "purge-older-than", 0, "purge-during: purge images older than this (default half of -days)")
	fs.IntVar(&c.purgeFleet.cameras, "purge-cameras", 0, "seed and purge-during: seed history into a fleet of this many cameras of its own, all of it expired (from -days ago to -purge-older-than ago), and only the first minute of -cameras' fleet")
	fs.StringVar(&c.purgeFleet.prefix, "purge-camera-prefix", "purge-cam-", "prefix of the camera ids of the -purge-cameras fleet")
	fs.DurationVar(&c.minSpan, "min-span", 5*time.Second, "purge-during: the shortest window of calls compared, from the purge's start and just before it")
	fs.BoolVar(&c.skipSeed, "skip-seed", false, "purge-during: seed nothing; a seed run with the same fleet flags wrote the history already")
	fs.BoolVar(&c.ceiling, "ceiling", false, "run, soak and history (at every depth): first measure health checks at the same concurrency and report ratios")
	fs.IntVar(&c.serverPID, "server-pid", 0, "pid of the server whose CPU time runs report and whose RSS soak samples (default: the local process listening on -addr's port, if any; -1: none)")
	fs.DurationVar(&c.rssInterval, "rss-interval", 5*time.Second, "how often soak samples the server's RSS")
	fs.StringVar(&c.reportPath, "report", "-", "file the JSON report is written to; - is stdout")
	fs.StringVar(&c.progress, "progress", "auto", "live progress on stderr: auto (when stderr is a terminal), on, off")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the tool itself to this file")
	if err := fs.Parse(args[1:]); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.fleet.kinds, err = parseKinds(*types); err != nil {
		return config{}, err
	}
	c.purgeFleet.kinds = c.fleet.kinds
	if c.load.mix, err = parseMix(*mixFlag); err != nil {
		return config{}, err
	}
	if c.historyDays, err = parseDays(*historyDays); err != nil {
		return config{}, err
	}
	return c, c.check()
}

func (c *config) check() error {
	switch {
	case c.fleet.cameras < 1:
		return errors.New("-cameras must be at least 1")
	case c.load.concurrency < 1 || c.seedConcurrency < 1:
		return errors.New("-concurrency and -seed-concurrency must be at least 1")
	case c.conns < 1:
		return errors.New("-conns must be at least 1")
	case c.load.rate < 0 || c.load.ops < 0 || c.days < 0:
		return errors.New("-rate, -ops and -days must not be negative")
	case c.load.duration <= 0 && c.load.ops == 0:
		return errors.New("give -duration or -ops: a run must be bounded")
	case c.seedInterval < time.Minute || c.seedInterval%time.Minute != 0:
		return errors.New("-seed-interval must be a whole number of minutes")
	case c.fleet.batchSize < 1 || c.fleet.batchSize > 1000:
		return errors.New("-batch-size must be 1 to 1000")
	case c.fleet.listPageSize < 1 || c.fleet.listPageSize > 1000:
		return errors.New("-list-page-size must be 1 to 1000")
	case c.fleet.listWindow <= 0:
		return errors.New("-list-window must be positive")
	case c.progress != "auto" && c.progress != "on" && c.progress != "off":
		return errors.New("-progress must be auto, on or off")
	case c.mode == "seed" && c.days == 0:
		return errors.New("seed needs -days")
	case c.purgeFleet.cameras < 0:
		return errors.New("-purge-cameras must not be negative")
	case c.purgeFleet.cameras > 0 && c.mode != "seed" && c.mode != "purge-during":
		return errors.New("-purge-cameras is for seed and purge-during")
	case c.purgeFleet.cameras > 0 && c.purgeFleet.prefix == c.fleet.prefix:
		return errors.New("-purge-camera-prefix must differ from -camera-prefix: the two fleets are different cameras")
	case c.minSpan <= 0:
		return errors.New("-min-span must be positive")
	case c.skipSeed && c.mode != "purge-during":
		return errors.New("-skip-seed is for purge-during")
	}
	if c.mode == "purge-during" || c.purgeFleet.cameras > 0 {
		if c.days == 0 {
			return errors.New("purge-during needs -days of history to purge")
		}
		if c.purgeAge == 0 {
			c.purgeAge = time.Duration(c.days) * 24 * time.Hour / 2
		}
		if c.purgeAge <= 0 || c.purgeAge >= time.Duration(c.days)*24*time.Hour {
			return errors.New("-purge-older-than must be positive and younger than -days, so the purge has work and spares some history")
		}
	}
	return nil
}

func parseDays(s string) ([]int, error) {
	var days []int
	for f := range strings.SplitSeq(s, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 1 || (len(days) > 0 && d <= days[len(days)-1]) {
			return nil, fmt.Errorf("-history-days: %q is not a rising list of whole days", s)
		}
		days = append(days, d)
	}
	return days, nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"golang.org/x/term"
)

// gcPercent is the garbage collector's target when GOGC is unset. The
// tool's heap is a few MiB, so at Go's default, 100, it collects many times
// a second under load: 7-8% of its CPU at 64 clients, taken from a server
// on the same machine. metadatad sets the same for the same reason.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes: a run that measured what it was asked to is 0; a soak with
// errors, a failed purge or a failure to reach the server is 1; bad usage is 2.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// run is the whole tool: it parses args, runs the mode against the server
// and writes the report, returning the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "metadata-load:", err)
		return exitUsage
	}
	if cfg.cpuProfile != "" {
		stop, err := startCPUProfile(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "metadata-load: -cpuprofile:", err)
			return exitUsage
		}
		defer stop()
	}
	conns, err := dialAll(cfg.client, cfg.conns)
	if err != nil {
		fmt.Fprintln(stderr, "metadata-load:", err)
		return exitUsage
	}
	defer closeAll(conns)
	if !cfg.client.Secure() && cfg.client.SendsToken() {
		fmt.Fprintln(stderr, "metadata-load: warning: the bearer token is sent without TLS")
	}
	rep, err := execute(ctx, cfg, conns, progressFor(cfg.progress, stderr))
	if rep != nil {
		if werr := rep.write(cfg.reportPath, stdout); werr != nil {
			fmt.Fprintln(stderr, "metadata-load: report:", werr)
			return exitFail
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "metadata-load:", err)
		return exitFail
	}
	return exitOK
}

// startCPUProfile profiles the tool into path until the returned stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// progressFor is the live progress -progress asks for: with auto, only
// when stderr is a terminal, so logs and CI output stay quiet.
func progressFor(mode string, stderr io.Writer) *progress {
	switch mode {
	case "on":
		return &progress{w: stderr}
	case "auto":
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return &progress{w: stderr}
		}
	}
	return nil
}

package auth

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// watchFile loads path now, then reads it again every interval until ctx
// ends and loads it whenever its content changed. It polls rather than
// watching for file events, so it also sees Kubernetes swapping a Secret
// volume's ..data symlink. A version that fails to load is logged (by path
// and error, never content) and the last good one stays in force.
func watchFile(ctx context.Context, path string, interval time.Duration, log *slog.Logger, load func([]byte) error) error {
	last, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := load(last); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			data, err := os.ReadFile(path)
			if err != nil {
				log.Error("reading file, keeping its last version", "path", path, "err", err)
				continue
			}
			if bytes.Equal(data, last) {
				continue
			}
			last = data
			if err := load(data); err != nil {
				log.Error("reloading file, keeping its last version", "path", path, "err", err)
				continue
			}
			log.Info("reloaded", "path", path)
		}
	}()
	return nil
}

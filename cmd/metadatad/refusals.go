package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/metadatad/metadatad/store/pebble/backup"
)

// notAlone is the refusal of a data directory the engine could not open
// for this process alone, naming the process that holds it when the
// system tells, and fix, what to do instead.
func notAlone(dir string, err error, fix string) error {
	holder := ""
	if h := lockHolder(dir); h != "" {
		holder = ": " + h + " holds it"
	}
	return fmt.Errorf("cannot open the store in %s for itself alone (%w)%s; %s", dir, err, holder, fix)
}

// locked reports whether err is the engine's lock on its directory held
// by another process.
func locked(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EWOULDBLOCK)
}

// refuseBackup refuses to serve a directory that holds a backup: the
// engine would change its files, and it would no longer restore.
func refuseBackup(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, backup.ManifestName)); err != nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return fmt.Errorf("%s holds a backup (%s): serving it would change its files and it would no longer restore; "+
		"restore it into a new directory and serve that: metadatad restore -from %s -data-dir NEW_DIR", dir, backup.ManifestName, abs)
}

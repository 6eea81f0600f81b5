package pebble

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// UnfinishedName is the marker file a restore or a copy writes into a data
// directory before anything else and removes once the directory holds the
// whole store. Open refuses a directory that holds it.
const UnfinishedName = "METADATAD-UNFINISHED"

// ErrUnfinished reports a data directory that a restore or a copy is still
// writing, or was killed while writing: its files are part of a store, and
// serving them would answer as if the missing rows had never existed.
var ErrUnfinished = errors.New("pebble: unfinished data directory")

// Unfinished is what the marker records.
type Unfinished struct {
	// Command is the subcommand writing the directory: "restore" or "copy".
	// It is empty when the marker could not be read (cut short while it was
	// written).
	Command string `json:"command"`
	// Args is the command line that finishes the directory, from the
	// program's name on, as the refusal quotes it.
	Args []string `json:"args"`
}

// Rerun is the command line of Args, quoted for a POSIX shell.
func (u Unfinished) Rerun() string {
	quoted := make([]string, len(u.Args))
	for i, a := range u.Args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote leaves a word of safe characters as it is and single-quotes
// any other.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// MarkUnfinished records in dir, created if missing, that u.Command is
// writing it, replacing a marker of the same command (whose rerun may
// differ) or an unreadable one. The marker is synced, and so is dir, before
// it returns, so nothing written after it can be on disk without it. A
// marker of another command is left alone: the error wraps ErrUnfinished
// and says which command to rerun.
func MarkUnfinished(dir string, u Unfinished) error {
	if err := checkUnfinished(vfs.Default, dir, u.Command); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	marker := filepath.Join(dir, UnfinishedName)
	// A marker already there (a rerun's) is replaced by a rename, so a
	// process killed meanwhile leaves the old one whole and the refusal
	// keeps its exact command. The first is one small write in place: a
	// kill around it leaves it empty at worst, which still refuses the
	// directory (see ReadUnfinished), and no stray file that would make a
	// new directory look non-empty.
	target := marker
	if _, err := os.Stat(marker); err == nil {
		target = marker + replacementSuffix
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	if target != marker {
		if err := os.Rename(target, marker); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// replacementSuffix names the file a marker's replacement is written to
// before it is renamed over the marker.
const replacementSuffix = ".new"

// MarkFinished removes the marker from dir, once what it announced is
// whole and synced, and syncs dir. A directory without one is left alone.
func MarkFinished(dir string) error {
	// A replacement a killed rerun left is no use once the directory is whole.
	if err := os.Remove(filepath.Join(dir, UnfinishedName+replacementSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err := os.Remove(filepath.Join(dir, UnfinishedName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// ReadUnfinished reads the marker of dir; found is false when it has none.
// A marker that does not parse is found with an empty Command.
func ReadUnfinished(dir string) (u Unfinished, found bool, err error) {
	return readUnfinished(vfs.Default, dir)
}

func readUnfinished(fs vfs.FS, dir string) (u Unfinished, found bool, err error) {
	f, err := fs.Open(fs.PathJoin(dir, UnfinishedName))
	if errors.Is(err, os.ErrNotExist) {
		return Unfinished{}, false, nil
	}
	if err != nil {
		return Unfinished{}, false, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return Unfinished{}, false, err
	}
	if json.Unmarshal(data, &u) != nil {
		return Unfinished{}, true, nil
	}
	return u, true, nil
}

// checkUnfinished refuses dir if it holds a marker, unless the marker is
// allow's (an unreadable one is taken for anyone's: only the command that
// resumes in place, never the one that clears, asks for it). It reads and
// writes nothing else, so it can run before anything looks at the store's
// own files.
func checkUnfinished(fs vfs.FS, dir, allow string) error {
	u, found, err := readUnfinished(fs, dir)
	if err != nil {
		return fmt.Errorf("pebble: reading %s: %w", fs.PathJoin(dir, UnfinishedName), err)
	}
	if !found || (allow != "" && (u.Command == allow || u.Command == "")) {
		return nil
	}
	return unfinishedError(dir, u)
}

func unfinishedError(dir string, u Unfinished) error {
	if u.Command == "" || len(u.Args) == 0 {
		return fmt.Errorf("%w: the data directory %s holds a restore or copy that did not finish (its marker %s is unreadable): run that command again",
			ErrUnfinished, dir, UnfinishedName)
	}
	return fmt.Errorf("%w: the data directory %s holds a %s that did not finish: run `%s` again", ErrUnfinished, dir, u.Command, u.Rerun())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FormatVersion is the version of the backup layout this package writes and
// the only one it restores.
const FormatVersion = 1

// ManifestName is the manifest's file name inside a backup directory.
const ManifestName = "metadatad-backup.json"

// EnginePebble names the engine whose files a backup holds.
const EnginePebble = "pebble"

// Errors of backups and restores; tested with errors.Is.
var (
	// ErrDamaged reports a backup whose files do not match its manifest:
	// missing, truncated or changed.
	ErrDamaged = errors.New("backup: damaged")
	// ErrFormat reports a manifest this version cannot read.
	ErrFormat = errors.New("backup: unknown format")
	// ErrNotEmpty reports a target directory that already holds files.
	ErrNotEmpty = errors.New("backup: target directory is not empty")
	// ErrBusy reports a backup asked for while another is being taken.
	ErrBusy = errors.New("backup: another backup is running")
)

// File is one file of a backup.
type File struct {
	// Name is the file's name, relative to the backup directory.
	Name string `json:"name"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of its content.
	SHA256 string `json:"sha256"`
}

// Manifest describes a backup.
type Manifest struct {
	FormatVersion int    `json:"formatVersion"`
	Engine        string `json:"engine"`
	// Created is when the checkpoint was taken.
	Created time.Time `json:"created"`
	// Tables are the tables holding rows, by the name their keys carry
	// (lower case).
	Tables []string `json:"tables"`
	// Files are the backup's files, each once.
	Files []File `json:"files"`
}

// TotalBytes is the sum of the files' sizes.
func (m *Manifest) TotalBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// check refuses a manifest this version cannot restore, or whose file names
// could reach outside the directory it is restored into.
func (m *Manifest) check() error {
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("%w: the backup has format version %d; this metadatad reads version %d", ErrFormat, m.FormatVersion, FormatVersion)
	}
	if m.Engine != EnginePebble {
		return fmt.Errorf("%w: the backup holds files of engine %q, not %q", ErrFormat, m.Engine, EnginePebble)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if f.Name == "" || f.Name == ManifestName || !filepath.IsLocal(f.Name) || filepath.Base(f.Name) != f.Name || seen[f.Name] {
			return fmt.Errorf("%w: the manifest lists the file name %q, which no backup holds", ErrDamaged, f.Name)
		}
		if f.Size < 0 || len(f.SHA256) != 64 {
			return fmt.Errorf("%w: the manifest's entry for %s has no valid size or SHA-256", ErrDamaged, f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// ReadManifest reads and checks the manifest of the backup in dir.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s: it is not a backup, or one that did not finish", ErrDamaged, dir, ManifestName)
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDamaged, filepath.Join(dir, ManifestName), err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

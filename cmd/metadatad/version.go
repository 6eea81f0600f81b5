package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// buildInfo is what `metadatad version` prints and metadatad_build_info
// labels, read from the binary's build information.
type buildInfo struct {
	// Version is the module version, "(devel)" in a build of a work tree.
	Version string
	// Revision is the VCS revision, with "-dirty" when the tree had
	// changes; "unknown" without VCS information (go run, tests).
	Revision  string
	GoVersion string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		b.Revision += "-dirty"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("metadatad %s (revision %s, %s)", b.Version, b.Revision, b.GoVersion)
}

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

// version and revision, when the linker stamps them (-ldflags "-X
// main.version=... -X main.revision=..."), stand for the build
// information's: the container image is built without .git (see
// deploy/Dockerfile), so it has no VCS information of its own.
var version, revision string

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.fromModule(info)
	}
	if version != "" {
		b.Version = version
	}
	if revision != "" {
		b.Revision = revision
	}
	return b
}

// fromModule takes the module version and VCS revision of info.
func (b *buildInfo) fromModule(info *debug.BuildInfo) {
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
}

func (b buildInfo) String() string {
	return fmt.Sprintf("metadatad %s (revision %s, %s)", b.Version, b.Revision, b.GoVersion)
}

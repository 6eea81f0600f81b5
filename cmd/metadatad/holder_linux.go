package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lockHolder names the process that holds the engine's lock on dir, as
// "process 1234 (metadatad copy)", read from /proc/locks; "" when it
// cannot tell. It names the program and its command, never the flags,
// which may hold a connection string.
func lockHolder(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "LOCK"), &st); err != nil {
		return ""
	}
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer locks.Close()
	scanner := bufio.NewScanner(locks)
	for scanner.Scan() {
		// 1: POSIX  ADVISORY  WRITE 23217 fe:00:9981186 0 EOF
		fields := strings.Fields(scanner.Text())
		if len(fields) < 6 || fields[5] != file {
			continue
		}
		pid := fields[4]
		cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil || len(cmdline) == 0 {
			return "process " + pid
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		name := filepath.Base(args[0])
		if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			name += " " + args[1]
		}
		return fmt.Sprintf("process %s (%s)", pid, name)
	}
	return ""
}

package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// otherTools are the sections of the README whose code names the flags of
// other programs (tools/test, go test, the load tool) without their name.
var otherTools = map[string]bool{"Set-up": true, "Load testing": true, "Development": true}

// notMetadatad are flags the README writes alone in code that are not
// metadatad's: help's, and grpcurl's -plaintext.
var notMetadatad = map[string]bool{"h": true, "help": true, "plaintext": true}

// TestReadmeFlagsExist: every flag the README writes in code, alone
// (`-purge-use-policies`) or after metadatad (`metadatad copy -from ...`),
// outside code blocks, which the example tests run, is a flag of metadatad
// or of one of its commands, as their help lists them: a renamed or
// misspelt flag in the prose would send an operator to one that is not.
func TestReadmeFlagsExist(t *testing.T) {
	known := commandFlags(t)
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	prose := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(raw), "")
	span := regexp.MustCompile("`([^`\n]+)`")
	flag := regexp.MustCompile(`(?:^| )-([a-z][a-z0-9-]*)`)
	checked := 0
	for _, section := range strings.Split(prose, "\n## ")[1:] {
		title, _, _ := strings.Cut(section, "\n")
		if otherTools[title] {
			continue
		}
		for _, s := range span.FindAllStringSubmatch(section, -1) {
			if !strings.HasPrefix(s[1], "-") && !strings.HasPrefix(s[1], "metadatad ") {
				continue
			}
			for _, f := range flag.FindAllStringSubmatch(s[1], -1) {
				checked++
				if !known[f[1]] && !notMetadatad[f[1]] {
					t.Errorf("README, %s: `%s` names -%s, which no metadatad command has", title, s[1], f[1])
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked %d flags of the README, want the hundred-odd it names", checked)
	}
}

// commandFlags are the flags of metadatad and of each command its help
// lists, as `metadatad help COMMAND` prints them.
func commandFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := binaryFlags(t)
	out, err := exec.Command(binary, "help").Output()
	if err != nil {
		t.Fatalf("metadatad help: %v", err)
	}
	commands, _, _ := strings.Cut(strings.SplitN(string(out), "\nCommands:\n", 2)[1], "\n\n")
	for _, line := range strings.Split(commands, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		help, err := exec.Command(binary, "help", name).Output()
		if err != nil {
			t.Fatalf("metadatad help %s: %v", name, err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
			flags[m[1]] = true
		}
	}
	return flags
}

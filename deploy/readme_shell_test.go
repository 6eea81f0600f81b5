package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/azurite"
)

// readmeSections are the README's "## " sections, each with its sh blocks
// (fenced code outside them is not read: a "# comment" in a block is no
// heading).
func readmeSections(t *testing.T) map[string][]string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]string{}
	heading, fence := "", ""
	var block strings.Builder
	for _, line := range strings.Split(string(readme), "\n") {
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence = strings.TrimPrefix(line, "```")
			block.Reset()
		case fence != "" && line == "```":
			if fence == "sh" {
				sections[heading] = append(sections[heading], block.String())
			}
			fence = ""
		case fence != "":
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "## "):
			heading = strings.TrimPrefix(line, "## ")
		}
	}
	return sections
}

// runByOtherTests are the sections whose examples other tests run.
var runByOtherTests = map[string]string{
	"The API with grpcurl": "TestReadmeGRPCExamples",
	"Secured deployment":   "TestReadmeSecuredDeployment",
}

// TestReadmeShellExamples runs every other sh example of the README as a
// reader would type it, section by section, each on a machine of its own
// (readerShell), and checks what each says it does: the servers it starts
// serve a create and a read, a backup restores to a server holding the
// backed-up image, a copy to Azure and back holds it too, compact prints
// the line the README shows, the load tool's modes exit 0. A command this
// test does not know fails it, so a new example is run or is refused here.
// A section may ask for a store first: Configuration's compact and Moving
// to Azure's copy want a stopped server's store in /var/lib/metadatad,
// Backups a running one.
func TestReadmeShellExamples(t *testing.T) {
	sections := readmeSections(t)
	for heading := range runByOtherTests {
		if len(sections[heading]) == 0 {
			t.Errorf("the README's %q section has no sh example for %s to run", heading, runByOtherTests[heading])
		}
	}
	setups := map[string]func(*readerShell){
		"Configuration": func(sh *readerShell) { sh.seedStore(false) },
		"Backups":       func(sh *readerShell) { sh.seedStore(true) },
		"Moving to Azure": func(sh *readerShell) {
			sh.seedStore(false)
		},
	}
	checks := map[string]func(*readerShell){
		"Set-up": func(sh *readerShell) {
			// "with the embedded store in ./data"
			if _, err := os.Stat(filepath.Join(sh.root, "data")); err != nil {
				t.Errorf("go run ./cmd/metadatad made no store in ./data: %v", err)
			}
		},
		"Configuration": func(sh *readerShell) {
			sh.outputFollowsItsComment("metadatad compact ")
		},
		"Backups": func(sh *readerShell) {
			// The last server the section starts serves the restored store.
			sh.holdsSeededImage(sh.servers[len(sh.servers)-1].addrs["serving"])
		},
		"Moving to Azure": func(sh *readerShell) {
			sh.holdsSeededImage(sh.serve([]string{"-data-dir", filepath.Join(sh.root, "var/lib/metadatad-test")}))
		},
	}
	var headings []string
	for heading := range sections {
		if _, ok := runByOtherTests[heading]; !ok {
			headings = append(headings, heading)
		}
	}
	slices.Sort(headings)
	for _, heading := range headings {
		t.Run(heading, func(t *testing.T) {
			sh := newReaderShell(t)
			if setup := setups[heading]; setup != nil {
				setup(sh)
			}
			for _, block := range sections[heading] {
				sh.runBlock(block)
			}
			if check := checks[heading]; check != nil {
				check(sh)
			}
		})
	}
	for _, want := range []string{"Set-up", "Configuration", "Backups", "Moving to Azure", "Azure Table Storage and Queue Storage", "Load testing"} {
		if len(sections[want]) == 0 {
			t.Errorf("the README's %q section has no sh example any more: is this test's table stale?", want)
		}
	}
}

// readerShell is a reader's machine for the README's examples. The paths
// they name (/var/lib/..., /backups/..., /tmp/..., ./data, bin/) live
// under root, which is also the directory the commands run in; each server
// listens on a free loopback port, and localhost:50051 in a later command
// is the last one started; the Azure account is the tests' emulator, and
// the table prefix and queue are the test's own (the emulator is shared
// with the other packages' tests).
type readerShell struct {
	t       *testing.T
	root    string
	env     []string
	servers []*daemon
	running map[*daemon]string // server -> the data directory it holds ("" on Azure)
	outputs map[string][]byte  // command line -> its output
	lines   []string           // every line run, in order
	suffix  string             // makes the Azure names the test's own
	ranLoad bool
}

func newReaderShell(t *testing.T) *readerShell {
	return &readerShell{
		t: t, root: t.TempDir(), running: map[*daemon]string{}, outputs: map[string][]byte{},
		suffix: fmt.Sprintf("%06d", time.Now().UnixNano()%1e6),
	}
}

// runBlock runs an sh block's commands in order.
func (sh *readerShell) runBlock(block string) {
	for _, line := range commandLines(block) {
		line = strings.TrimSpace(line)
		sh.lines = append(sh.lines, line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		started := time.Now()
		sh.run(line, shellWords(sh.t, line))
		sh.t.Logf("%s: %v", line, time.Since(started).Round(time.Millisecond))
	}
}

// run runs one command line, split into words.
func (sh *readerShell) run(line string, words []string) {
	t := sh.t
	t.Helper()
	var env []string
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
		env, words = append(env, words[0]), words[1:]
	}
	background := len(words) > 0 && words[len(words)-1] == "&"
	if background {
		words = words[:len(words)-1]
	}
	var stdout string
	if i := slices.Index(words, ">"); i >= 0 && i == len(words)-2 {
		stdout, words = sh.path(words[i+1]), words[:i]
	}
	switch {
	case len(words) == 3 && words[0] == "export":
		t.Fatalf("%q: export NAME='VALUE' is one word after export", line)
	case len(words) == 2 && words[0] == "export":
		name, value, _ := strings.Cut(words[1], "=")
		sh.env = append(sh.env, name+"="+sh.exported(name, value))
	case slices.Equal(words[:min(3, len(words))], []string{"go", "run", "./cmd/metadatad"}):
		sh.metadatad(line, binary, words[3:], env)
	case slices.Equal(words, []string{"go", "run", "./tools/test"}):
		// The README's test command is what runs this test; .ci/run runs it.
		sh.mustContain("../.ci/run", "go run ./tools/test")
	case words[0] == "metadatad" || words[0] == "bin/metadatad":
		program := binary
		if words[0] == "bin/metadatad" {
			sh.mustExist("bin/metadatad", line)
			program = sh.path("bin/metadatad")
		}
		sh.metadatad(line, program, words[1:], env)
	case words[0] == "bin/metadata-load":
		sh.mustExist("bin/metadata-load", line)
		sh.load(line, words[1:], stdout)
		stdout = ""
	case len(words) > 3 && words[0] == "go" && words[1] == "build" && words[2] == "-o":
		// Built for real, from the repository, into the reader's bin/.
		args := slices.Clone(words[1:])
		args[2] = sh.path(args[2]) + string(filepath.Separator)
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	case slices.Equal(words, []string{"npm", "ci", "--prefix", "tools/azurite"}):
		// What tools/test runs before the suites: the emulator the tests
		// start (internal/azurite) is the one this installs.
		sh.mustContain("../tools/test/main.go", `"ci", "--prefix"`)
	case words[0] == "tools/azurite/node_modules/.bin/azurite" && background:
		sh.azurite(words[1:])
	case words[0] == "go" && words[1] == "tool":
		// Development: .ci/run runs the same.
		sh.mustContain("../.ci/run", strings.Join(words, " "))
	case slices.Equal(words, []string{"bash", ".ci/run"}):
		sh.mustExist("../.ci/run", line)
	case words[0] == "go" && words[1] == "test":
		sh.goTest(line, words[2:])
	default:
		t.Fatalf("the README runs %q, which this test does not know", line)
	}
	if stdout != "" {
		t.Fatalf("%q: only the load tool's output is redirected here", line)
	}
	if background && !strings.Contains(line, "azurite") && !strings.Contains(line, "metadatad -data-dir") {
		t.Fatalf("%q runs in the background, which this test does only for servers", line)
	}
}

// path is a path the README names, on the reader's machine.
func (sh *readerShell) path(p string) string {
	if strings.HasPrefix(p, "embedded:") {
		return "embedded:" + sh.path(strings.TrimPrefix(p, "embedded:"))
	}
	if filepath.IsAbs(p) {
		return filepath.Join(sh.root, p)
	}
	return filepath.Join(sh.root, p)
}

func (sh *readerShell) mustExist(p, line string) {
	sh.t.Helper()
	if strings.HasPrefix(p, "bin/") {
		p = sh.path(p)
	}
	if _, err := os.Stat(p); err != nil {
		sh.t.Fatalf("%q: %v", line, err)
	}
}

func (sh *readerShell) mustContain(file, text string) {
	sh.t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		sh.t.Fatal(err)
	}
	if !strings.Contains(string(b), text) {
		sh.t.Errorf("the README says %q; %s does not run it", text, file)
	}
}

// exported is an exported variable's value on the reader's machine: the
// emulator's connection string for the README's own, which must be the
// one of Azurite's default ports, and for the placeholder of a real
// account's.
func (sh *readerShell) exported(name, value string) string {
	sh.t.Helper()
	if name != "AZURE_STORAGE_CONNECTION_STRING" {
		return value
	}
	defaultPorts := azurite.ConnectionString("http://127.0.0.1:10002", "http://127.0.0.1:10001")
	if !strings.Contains(value, "AccountName=...") && value != defaultPorts {
		sh.t.Errorf("the README's connection string\n%s\nis not the emulator's on its default ports:\n%s", value, defaultPorts)
	}
	return azurite.Require(sh.t)
}

// azurite checks the README starts the emulator as the tests do (but on
// its default ports), and uses the tests' emulator.
func (sh *readerShell) azurite(args []string) {
	sh.t.Helper()
	want := []string{"--inMemoryPersistence", "--loose", "--skipApiVersionCheck", "--disableProductStyleUrl",
		"--blobHost", "127.0.0.1", "--queueHost", "127.0.0.1", "--tableHost", "127.0.0.1"}
	if !slices.Equal(args, want) {
		sh.t.Errorf("the README starts azurite with %q; internal/azurite with %q (and port 0s)", args, want)
	}
	sh.mustContain("../internal/azurite/azurite.go", `"--inMemoryPersistence", "--loose", "--skipApiVersionCheck", "--disableProductStyleUrl"`)
	azurite.Require(sh.t)
}

// metadatad runs the daemon's command line: a command runs to its end and
// must succeed; a server is started and must serve a create and a read.
func (sh *readerShell) metadatad(line, program string, args, env []string) {
	t := sh.t
	t.Helper()
	args = slices.Clone(args)
	for i, a := range args {
		switch {
		case a == "localhost:50051":
			args[i] = sh.lastServer()
		case i > 0 && args[i-1] == "-azure-table-prefix":
			args[i] = a + sh.suffix
		case strings.HasPrefix(a, "/") || strings.HasPrefix(a, "embedded:/"):
			args[i] = sh.path(a)
		}
	}
	if slices.Contains(args, "-azure-table-url") {
		// A real account through DefaultAzureCredential: not on this
		// machine. Its flags must be the daemon's.
		flags := binaryFlags(t)
		for _, a := range args {
			if strings.HasPrefix(a, "-") && !flags[strings.TrimLeft(a, "-")] {
				t.Errorf("%q: metadatad has no flag %s", line, a)
			}
		}
		return
	}
	command := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command = args[0]
	}
	switch {
	case command == "" && slices.Contains(args, "-h"):
		out, _ := exec.Command(binary, args...).CombinedOutput() // -h exits 0; only the output matters here
		if !strings.Contains(string(out), "-data-dir") {
			t.Errorf("%q printed no flags:\n%s", line, out)
		}
	case strings.HasPrefix(command, "[") || command == "COMMAND":
		// The synopsis: each command it names must have its -h.
		if command == "COMMAND" {
			for _, c := range regexp.MustCompile(`\w+`).FindAllString(strings.Split(line, "#")[1], 4) {
				if out, _ := exec.Command(binary, c, "-h").CombinedOutput(); !strings.Contains(string(out), "Usage") && !strings.Contains(string(out), "usage") {
					t.Errorf("metadatad %s -h printed no usage:\n%s", c, out)
				}
			}
		}
	case command != "":
		for _, d := range sh.holding(args) {
			// "From the data directory of a stopped server", "stop the
			// server": the README's offline commands want it stopped.
			d.stop(t)
			delete(sh.running, d)
		}
		sh.asideEarlierBackup(args)
		cmd := exec.Command(program, args...)
		cmd.Dir, cmd.Env = sh.root, append(append(os.Environ(), sh.env...), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		sh.outputs[line] = out
	default:
		for _, d := range sh.holding(args) {
			d.stop(t)
			delete(sh.running, d)
		}
		sh.outputs[line] = nil
		addr := sh.serveWith(program, args, env)
		sh.createAndRead(addr, "readme-check")
	}
}

// serve starts a server with the given arguments and returns its address.
func (sh *readerShell) serve(args []string) string {
	return sh.serveWith(binary, args, nil)
}

func (sh *readerShell) serveWith(program string, args, env []string) string {
	sh.t.Helper()
	args = slices.Clone(args)
	dataDir := filepath.Join(sh.root, "data") // the default, in the working directory
	for i, a := range args {
		if a == "-data-dir" && i+1 < len(args) {
			dataDir = args[i+1]
		}
		if strings.HasPrefix(a, "-listen") {
			sh.t.Fatalf("the example's server sets %s; this test would replace it", a)
		}
	}
	args = append(args, "-listen=127.0.0.1:0", "-min-free-mib=0", "-log-format=json")
	if slices.Contains(args, "azure") {
		dataDir = ""
		args = append(args, "-azure-table-prefix=readme"+sh.suffix, "-purge-queue=readme-"+sh.suffix)
	}
	d := launchDaemon(sh.t, program, sh.root, args, append(slices.Clone(sh.env), env...))
	sh.servers = append(sh.servers, d)
	sh.running[d] = dataDir
	return d.addrs["serving"]
}

// holding are the running servers whose data directory a command names.
func (sh *readerShell) holding(args []string) []*daemon {
	var held []*daemon
	for d, dir := range sh.running {
		for _, a := range args {
			if dir != "" && (a == dir || a == "embedded:"+dir) {
				held = append(held, d)
			}
		}
	}
	return held
}

// asideEarlierBackup moves a backup an earlier line wrote to the same
// target: the README's backup commands are two ways to the same backup,
// and each must work on its own.
func (sh *readerShell) asideEarlierBackup(args []string) {
	if len(args) == 0 || args[0] != "backup" {
		return
	}
	if i := slices.Index(args, "-to"); i >= 0 && i+1 < len(args) {
		if _, err := os.Stat(filepath.Join(args[i+1], "metadatad-backup.json")); err == nil {
			if err := os.Rename(args[i+1], args[i+1]+fmt.Sprintf(".%d", time.Now().UnixNano())); err != nil {
				sh.t.Fatal(err)
			}
		}
	}
}

func (sh *readerShell) lastServer() string {
	sh.t.Helper()
	for i := len(sh.servers) - 1; i >= 0; i-- {
		if _, ok := sh.running[sh.servers[i]]; ok {
			return sh.servers[i].addrs["serving"]
		}
	}
	sh.t.Fatal("the example calls localhost:50051 with no server running")
	return ""
}

// seedStore writes an image into a store in /var/lib/metadatad, and
// leaves its server running or stops it.
func (sh *readerShell) seedStore(running bool) {
	addr := sh.serve([]string{"-data-dir", sh.path("/var/lib/metadatad")})
	sh.createAndRead(addr, "readme-seed")
	if !running {
		d := sh.servers[len(sh.servers)-1]
		d.stop(sh.t)
		delete(sh.running, d)
	}
}

// createAndRead creates an image of camera and reads it back as the
// camera's latest.
func (sh *readerShell) createAndRead(addr, camera string) {
	sh.t.Helper()
	create := fmt.Sprintf(`{"metadata": {"camera_id": %q, "captured_at": "2026-01-01T00:02:00Z", "blob_uri": "https://blobs.example/%s.jpg"}}`, camera, camera)
	if out, err := exec.Command(grpcurl, "-plaintext", "-d", create, addr, "metadata.v1.SingleImageMetadataService/CreateSingleImageMetadata").CombinedOutput(); err != nil {
		sh.t.Fatalf("create on %s: %v\n%s", addr, err, out)
	}
	sh.holdsImage(addr, camera)
}

func (sh *readerShell) holdsSeededImage(addr string) { sh.holdsImage(addr, "readme-seed") }

func (sh *readerShell) holdsImage(addr, camera string) {
	sh.t.Helper()
	out, err := exec.Command(grpcurl, "-plaintext", "-d", fmt.Sprintf(`{"camera_id": %q}`, camera), addr,
		"metadata.v1.SingleImageMetadataService/GetLatestSingleImageMetadata").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "https://blobs.example/"+camera+".jpg") {
		sh.t.Errorf("the server on %s does not have %s's image: %v\n%s", addr, camera, err, out)
	}
}

// outputFollowsItsComment checks the first line printed by the command
// starting with prefix against the comment line the README shows after
// it, numbers and durations aside.
func (sh *readerShell) outputFollowsItsComment(prefix string) {
	sh.t.Helper()
	for i, line := range sh.lines {
		if !strings.HasPrefix(line, prefix) || i+1 == len(sh.lines) {
			continue
		}
		shown := strings.TrimPrefix(sh.lines[i+1], "# ")
		var pattern strings.Builder
		at := 0
		for _, m := range regexp.MustCompile(`/var/lib/[^:\s]+|[0-9]+(\.[0-9]+)?([µnm]?s\b)?`).FindAllStringIndex(shown, -1) {
			pattern.WriteString(regexp.QuoteMeta(shown[at:m[0]]))
			switch token := shown[m[0]:m[1]]; {
			case strings.HasPrefix(token, "/"):
				pattern.WriteString(regexp.QuoteMeta(sh.path(token)))
			case strings.HasSuffix(token, "s"):
				pattern.WriteString(`[0-9.]+[µnm]?s`)
			default:
				pattern.WriteString(`[0-9]+`)
			}
			at = m[1]
		}
		pattern.WriteString(regexp.QuoteMeta(shown[at:]))
		if !regexp.MustCompile("^" + pattern.String() + "$").MatchString(strings.TrimSpace(string(sh.outputs[line]))) {
			sh.t.Errorf("%s printed\n%s\nthe README shows\n%s", line, sh.outputs[line], shown)
		}
		return
	}
	sh.t.Errorf("no %q command in the section", prefix)
}

// load runs a mode of the load tool against the last server, scaled to a
// test's size: 1 camera, at most 2 days of history (the history mode's
// depths 1 and 2) and 1 second of workload.
func (sh *readerShell) load(line string, args []string, stdout string) {
	t := sh.t
	t.Helper()
	args = slices.Clone(args)
	for i := 1; i < len(args); i++ {
		switch args[i-1] {
		case "-cameras":
			args[i] = "1"
		case "-history-days":
			args[i] = "1,2"
		case "-days":
			if args[i] != "1" && args[i] != "2" {
				args[i] = "2"
			}
		case "-duration":
			args[i] = "1s"
		}
	}
	args = append(args, "-addr="+sh.lastServer(), "-progress=off")
	cmd := exec.Command(filepath.Join(sh.root, "bin", "metadata-load"), args...)
	cmd.Dir = sh.root
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = exit.Stderr
		}
		t.Fatalf("%s (as %q): %v\n%s%s", line, args, err, out, stderr)
	}
	if stdout != "" {
		if err := os.WriteFile(stdout, out, 0o600); err != nil {
			t.Fatal(err)
		}
		var report map[string]any
		if err := json.Unmarshal(out, &report); err != nil || len(report) == 0 {
			t.Errorf("%s wrote no JSON report to %s: %v\n%s", line, stdout, err, out)
		}
	}
	sh.ranLoad = true
}

// goTest checks a go test command of the README names a package with the
// benchmarks or flags it passes; it is not run (the kill loop and the
// benchmarks take minutes, and the suites run anyway).
func (sh *readerShell) goTest(line string, args []string) {
	t := sh.t
	t.Helper()
	if len(args) == 0 || !strings.HasPrefix(args[0], "./") {
		t.Fatalf("%q names no package", line)
	}
	var sources strings.Builder
	files, _ := filepath.Glob(filepath.Join("..", args[0], "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources.Write(b)
	}
	if sources.Len() == 0 {
		t.Fatalf("%q: %s has no tests", line, args[0])
	}
	standard := map[string]bool{"run": true, "bench": true, "benchtime": true, "v": true, "count": true, "race": true, "timeout": true}
	for i, a := range args[1:] {
		name := strings.TrimLeft(a, "-")
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == "bench" && !strings.Contains(sources.String(), "\nfunc Benchmark"):
			t.Errorf("%q: %s has no benchmarks", line, args[0])
		case name == "run" && i+2 < len(args) && args[i+2] != "'^$'" && args[i+2] != "^$":
			if !strings.Contains(sources.String(), "\nfunc Test"+strings.Trim(args[i+2], "'")) && !strings.Contains(sources.String(), args[i+2]) {
				t.Errorf("%q: %s has no test matching %s", line, args[0], args[i+2])
			}
		case !standard[name] && !strings.Contains(sources.String(), fmt.Sprintf("flag.Int(%q", name)) && !strings.Contains(sources.String(), fmt.Sprintf("flag.Duration(%q", name)):
			t.Errorf("%q: %s defines no flag %s", line, args[0], a)
		}
	}
}

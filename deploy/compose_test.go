package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/metadatad/metadatad/internal/azurite"
)

// composeFile is the part of the Compose specification compose.yaml uses;
// a field outside it fails the strict parse.
type composeFile struct {
	Name     string
	Services map[string]struct {
		Image string
		Build *struct {
			Context    string
			Dockerfile string
			Args       map[string]string
		}
		Command     []string
		Environment map[string]string
		Ports       []string
		DependsOn   []string `json:"depends_on"`
		Restart     string
	}
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if _, ok := c.Services["metadatad"]; !ok {
		t.Fatal("compose.yaml has no metadatad service")
	}
	if _, ok := c.Services["azurite"]; !ok {
		t.Fatal("compose.yaml has no azurite service")
	}
	return c
}

// TestCompose checks compose.yaml as far as it can without Docker: the
// image is built by this Dockerfile, metadatad has every flag and
// METADATAD_ variable it passes, Azurite is the version the tests pin and
// has every option it passes, and the connection string names the azurite
// service with the development account. Then it runs metadatad with the
// service's own command and environment, the endpoints pointed at the
// tests' Azurite, and lists the API through reflection, as the file's
// header tells a user to.
func TestCompose(t *testing.T) {
	c := loadCompose(t)
	server, emulator := c.Services["metadatad"], c.Services["azurite"]
	if server.Build == nil || filepath.Join("..", server.Build.Context, server.Build.Dockerfile) != filepath.Join("..", "..", "deploy", "Dockerfile") {
		t.Errorf("metadatad is built from %+v, not the repository root with deploy/Dockerfile", server.Build)
	}
	flags := binaryFlags(t)
	for _, arg := range server.Command {
		if name := flagName(arg); name == "" || !flags[name] {
			t.Errorf("compose.yaml passes %q: metadatad has no such flag", arg)
		}
	}
	for name := range server.Environment {
		if rest, ok := strings.CutPrefix(name, "METADATAD_"); ok && !flags[strings.ReplaceAll(strings.ToLower(rest), "_", "-")] {
			t.Errorf("compose.yaml sets %s: metadatad has no such flag", name)
		}
	}
	if !strings.Contains(strings.Join(server.DependsOn, ","), "azurite") {
		t.Error("metadatad does not depend on azurite")
	}

	var pkg struct{ Dependencies map[string]string }
	raw, err := os.ReadFile("../tools/azurite/package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	if want := "mcr.microsoft.com/azure-storage/azurite:" + pkg.Dependencies["azurite"]; emulator.Image != want {
		t.Errorf("the azurite service runs %s; the tests run %s", emulator.Image, want)
	}
	if len(emulator.Command) == 0 || emulator.Command[0] != "azurite" {
		t.Fatalf("the azurite service's command %q does not start azurite", emulator.Command)
	}
	azuriteOptions(t, emulator.Command[1:])

	conn := connectionString(server.Environment["AZURE_STORAGE_CONNECTION_STRING"])
	for key, want := range map[string]string{
		"AccountName":   azurite.Account,
		"AccountKey":    azurite.Key,
		"TableEndpoint": "http://azurite:10002/" + azurite.Account,
		"QueueEndpoint": "http://azurite:10001/" + azurite.Account,
	} {
		if conn[key] != want {
			t.Errorf("the connection string's %s is %q, want %q", key, conn[key], want)
		}
	}

	local := connectionString(azurite.Require(t))
	var env []string
	for name, value := range server.Environment {
		if name == "AZURE_STORAGE_CONNECTION_STRING" {
			value = strings.NewReplacer(conn["TableEndpoint"], local["TableEndpoint"], conn["QueueEndpoint"], local["QueueEndpoint"]).Replace(value)
		}
		env = append(env, name+"="+value)
	}
	args := make([]string, len(server.Command))
	for i, arg := range server.Command {
		args[i] = arg
		switch flagName(arg) {
		case "listen", "health-listen", "metrics-listen":
			args[i] = "-" + flagName(arg) + "=127.0.0.1:0"
		}
	}
	addr := startDaemon(t, args, env)["serving"]
	out, err := exec.Command(grpcurl, "-plaintext", addr, "list").Output()
	if err != nil || !strings.Contains(string(out), "metadata.v1.SingleImageMetadataService") {
		t.Errorf("grpcurl -plaintext %s list: %v\n%s", addr, err, out)
	}
}

// TestComposeStampsTheVersion: compose.yaml passes each build argument
// the Dockerfile declares (VERSION, REVISION) from the shell's variable of
// the same name, empty when unset, and its header says how to set them; a
// build it leaves out would make the image say (devel), revision unknown.
func TestComposeStampsTheVersion(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	declared := regexp.MustCompile(`(?m)^ARG ([A-Z_]+)=`).FindAllStringSubmatch(string(raw), -1)
	if len(declared) == 0 {
		t.Fatal("the Dockerfile declares no build argument")
	}
	build := loadCompose(t).Services["metadatad"].Build
	if build == nil {
		t.Fatal("compose.yaml does not build metadatad")
	}
	header, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range declared {
		name := arg[1]
		if want := "${" + name + ":-}"; build.Args[name] != want {
			t.Errorf("compose.yaml's build passes %s as %q, want %q", name, build.Args[name], want)
		}
		if !strings.Contains(string(header), name+"=$(git ") {
			t.Errorf("compose.yaml's header does not say how to set %s", name)
		}
	}
	for name := range build.Args {
		if !slices.ContainsFunc(declared, func(d []string) bool { return d[1] == name }) {
			t.Errorf("compose.yaml passes the build argument %s, which the Dockerfile does not declare", name)
		}
	}
}

// connectionString splits an Azure Storage connection string into its keys.
func connectionString(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(strings.TrimSpace(s), ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			out[k] = v
		}
	}
	return out
}

// azuriteOptions checks each option is one the pinned Azurite lists in
// its help.
func azuriteOptions(t *testing.T, args []string) {
	t.Helper()
	bin := "../tools/azurite/node_modules/.bin/azurite"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tools/azurite is not installed: npm ci --prefix tools/azurite")
		}
		t.Log("Azurite's options are not checked: run `npm ci --prefix tools/azurite` once")
		return
	}
	help, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("azurite --help: %v\n%s", err, help)
	}
	for _, arg := range args {
		if strings.HasPrefix(arg, "--") && !strings.Contains(string(help), " "+arg+" ") {
			t.Errorf("the azurite service passes %s, which azurite %s does not list", arg, "--help")
		}
	}
}

package deploy_test

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/metadatad/metadatad/internal/azurite"
)

// binary is metadatad built as the Dockerfile builds it; grpcurl is the
// repository's pinned grpcurl (tools.mod), built once for every test that
// runs the README's or the manifests' calls.
var binary, grpcurl string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "metadatad-deploy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, grpcurl = filepath.Join(dir, "metadatad"), filepath.Join(dir, "grpcurl")
	code := 1
	if err := buildStatic(binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else if out, err := exec.Command("go", "build", "-modfile=../tools.mod", "-o", grpcurl, "github.com/fullstorydev/grpcurl/cmd/grpcurl").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building grpcurl: %v\n%s", err, out)
	} else {
		code = azurite.Main(m)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// The build arguments the tests give the Dockerfile's build, as
// `docker build --build-arg` would.
const (
	stampVersion  = "v1.2.3-deploytest"
	stampRevision = "0123456789abcdef0123456789abcdef01234567"
)

// dockerBuild is the Dockerfile's build command, up to its output.
var dockerBuild = regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*) -o /out/metadatad \./cmd/metadatad$`)

// buildStatic runs the Dockerfile's build command, as its RUN line says
// it, with the build arguments in the environment as docker gives them.
func buildStatic(out string) error {
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		return err
	}
	run := dockerBuild.FindSubmatch(raw)
	if run == nil {
		return errors.New("the Dockerfile has no RUN line building ./cmd/metadatad into /out/metadatad")
	}
	cmd := exec.Command("sh", "-c", string(run[1])+` -o "$OUT" ./cmd/metadatad`)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "VERSION="+stampVersion, "REVISION="+stampRevision, "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", run[1], err, b)
	}
	return nil
}

// TestImageKnowsItsVersion: the image's build has no .git, so the
// Dockerfile stamps the version and revision its build arguments give,
// and `metadatad version` and metadatad_build_info say them.
func TestImageKnowsItsVersion(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("metadatad version: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("metadatad %s (revision %s, ", stampVersion, stampRevision); !strings.HasPrefix(string(out), want) {
		t.Errorf("metadatad version printed %q, want it to start %q", out, want)
	}
	info := scrapeDaemon(t)["metadatad_build_info"]
	labels := map[string]string{}
	for _, m := range info.GetMetric() {
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
	}
	if labels["version"] != stampVersion || labels["revision"] != stampRevision {
		t.Errorf("metadatad_build_info is labelled %v, want version %s, revision %s", labels, stampVersion, stampRevision)
	}
}

// TestBinaryIsStatic: the distroless static image has no C library, so the
// binary must need no dynamic loader and no shared library.
func TestBinaryIsStatic(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %s: the binary is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
}

// TestDockerfileBuildsAsTested keeps the Dockerfile's build the one these
// tests run, on the base image they assume.
func TestDockerfileBuildsAsTested(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := string(raw)
	for _, want := range []string{
		`RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/metadatad ./cmd/metadatad`,
		"ARG VERSION=",
		"ARG REVISION=",
		"USER 65532:65532",
		`ENTRYPOINT ["/metadatad"]`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	goMod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	if version == nil {
		t.Fatal("go.mod names no go version")
	}
	if !regexp.MustCompile(`(?m)^FROM golang:` + regexp.QuoteMeta(string(version[1])) + digest + ` AS build$`).MatchString(d) {
		t.Errorf("the build stage is not golang:%s, the go.mod version", version[1])
	}
	if !regexp.MustCompile(`(?m)^FROM gcr\.io/distroless/static-debian12:nonroot` + digest + `$`).MatchString(d) {
		t.Error("the image is not built on gcr.io/distroless/static-debian12:nonroot")
	}
}

// digest is an optional image digest after a tag, as docker parses it.
const digest = `(@sha256:[0-9a-f]{64})?`

// TestPortsExposed: the image exposes the ports the metadatad containers
// of the manifests and compose.yaml declare, gRPC, health and metrics.
func TestPortsExposed(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^EXPOSE (.+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("the Dockerfile exposes no port")
	}
	exposed := strings.Fields(string(m[1]))
	slices.Sort(exposed)
	for workload, c := range metadatadContainers(t, loadManifests(t)) {
		var ports []string
		for _, p := range c.Ports {
			ports = append(ports, strconv.Itoa(p.ContainerPort))
		}
		slices.Sort(ports)
		if !slices.Equal(ports, exposed) {
			t.Errorf("%s declares ports %v, the image exposes %v", workload, ports, exposed)
		}
	}
	var published []string
	for _, p := range loadCompose(t).Services["metadatad"].Ports {
		published = append(published, p[strings.LastIndex(p, ":")+1:])
	}
	slices.Sort(published)
	if !slices.Equal(published, exposed) {
		t.Errorf("compose.yaml publishes ports %v, the image exposes %v", published, exposed)
	}
}

// TestDockerignore reads .dockerignore as docker does: the build context
// leaves out the Node packages, a data directory and .git, and keeps every
// file `go build ./cmd/metadatad` reads.
func TestDockerignore(t *testing.T) {
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ignored := func(path string) bool {
		t.Helper()
		ok, err := ignore.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, path := range []string{".git/HEAD", "tools/azurite/node_modules/azurite/package.json", "data/MANIFEST-000001", "metadatad", "deploy/deploy.test"} {
		if !ignored(path) {
			t.Errorf("the build context holds %s", path)
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{$dir := .Dir}}{{range .GoFiles}}{{$dir}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$dir}}/{{.}}
{{end}}{{end}}`, "../cmd/metadatad").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, path := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
			needed = append(needed, filepath.ToSlash(rel))
		}
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v in the module", needed)
	}
	for _, path := range needed {
		if ignored(path) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", path)
		}
	}
}

// binaryFlags are the flags `metadatad -help` lists.
func binaryFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(binary, "-help").CombinedOutput() // -help exits non-zero
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["listen"] || !flags["store"] {
		t.Fatalf("-help listed no -listen or -store:\n%s", out)
	}
	return flags
}

// metadatadContainers are the containers of the manifests that run metadatad.
func metadatadContainers(t *testing.T, objects []object) map[string]container {
	t.Helper()
	out := map[string]container{}
	for _, o := range objects {
		switch o.kind() {
		case "Deployment", "StatefulSet":
			for _, c := range containers(t, podSpec(o)) {
				// REGISTRY/metadatad:TAG
				if _, repo, _ := strings.Cut(c.Image, "/"); strings.HasPrefix(repo, "metadatad:") {
					out[o.kind()+"/"+o.name()] = c
				}
			}
		}
	}
	if len(out) != 2 {
		t.Fatalf("metadatad runs in %d workloads, want the Deployment and the StatefulSet", len(out))
	}
	return out
}

// TestManifestFlagsExist: every flag the manifests pass, and every
// METADATAD_ variable they set, is one the binary has.
func TestManifestFlagsExist(t *testing.T) {
	flags := binaryFlags(t)
	for workload, c := range metadatadContainers(t, loadManifests(t)) {
		for _, arg := range c.Args {
			if name := flagName(arg); name == "" || !flags[name] {
				t.Errorf("%s passes %q: metadatad has no such flag", workload, arg)
			}
		}
		for _, e := range c.Env {
			name, ok := strings.CutPrefix(e.Name, "METADATAD_")
			if ok && !flags[strings.ReplaceAll(strings.ToLower(name), "_", "-")] {
				t.Errorf("%s sets %s: metadatad has no such flag", workload, e.Name)
			}
		}
	}
}

// TestManifestsAuthenticate: the workloads listen on every interface,
// where metadatad refuses to start without authentication; they configure
// it rather than opt out with -allow-unauthenticated.
func TestManifestsAuthenticate(t *testing.T) {
	for workload, c := range metadatadContainers(t, loadManifests(t)) {
		var authenticates bool
		for _, arg := range c.Args {
			switch flagName(arg) {
			case "auth-token-file", "auth-jwks-url", "auth-jwks-file":
				authenticates = true
			case "allow-unauthenticated":
				t.Errorf("%s passes %s: every caller could call everything", workload, arg)
			}
		}
		if !authenticates {
			t.Errorf("%s configures no authentication (-auth-token-file, -auth-jwks-url or -auth-jwks-file)", workload)
		}
	}
}

// TestManifestsLimitGoMemory: each metadatad container has a memory limit
// and gives the Go runtime 90% of it as GOMEMLIMIT (within a MiB), leaving
// headroom for the memory the runtime does not count.
func TestManifestsLimitGoMemory(t *testing.T) {
	for workload, c := range metadatadContainers(t, loadManifests(t)) {
		limit, err := memoryBytes(c.Resources.Limits["memory"])
		if err != nil {
			t.Errorf("%s: memory limit: %v", workload, err)
			continue
		}
		i := slices.IndexFunc(c.Env, func(e envVar) bool { return e.Name == "GOMEMLIMIT" })
		if i < 0 {
			t.Errorf("%s sets no GOMEMLIMIT", workload)
			continue
		}
		soft, err := memoryBytes(c.Env[i].Value)
		if want := limit * 9 / 10; err != nil || soft > want || want-soft > 1<<20 {
			t.Errorf("%s: GOMEMLIMIT %q (%v), want 90%% of the limit %s, %d bytes", workload, c.Env[i].Value, err, c.Resources.Limits["memory"], want)
		}
	}
}

// memoryBytes reads a Kubernetes binary quantity (1Gi) or a GOMEMLIMIT
// (921MiB) as bytes.
func memoryBytes(q string) (int64, error) {
	for i, unit := range []string{"Ki", "Mi", "Gi"} {
		for _, suffix := range []string{unit + "B", unit} {
			if n, ok := strings.CutSuffix(q, suffix); ok {
				v, err := strconv.ParseInt(n, 10, 64)
				return v << (10 * (i + 1)), err
			}
		}
	}
	return 0, fmt.Errorf("%q is not a number of Ki, Mi or Gi", q)
}

// TestManifestShape checks what the deployment promises: Azure mode
// replicated behind a PodDisruptionBudget, embedded mode one replica on a
// volume, native gRPC probes, non-root, a purge CronJob that never
// overlaps, and only Secrets that exist.
func TestManifestShape(t *testing.T) {
	objects := loadManifests(t)
	deployment := find(t, objects, "Deployment", "metadatad")
	if r, _ := deployment.get("spec", "replicas").(float64); r < 2 {
		t.Errorf("Deployment replicas %v, want several", r)
	}
	pdb := find(t, objects, "PodDisruptionBudget", "metadatad")
	if fmt.Sprint(pdb.get("spec", "selector", "matchLabels")) != fmt.Sprint(deployment.get("spec", "template", "metadata", "labels")) {
		t.Errorf("the PodDisruptionBudget selects %v, not the Deployment's pods", pdb.get("spec", "selector", "matchLabels"))
	}
	sts := find(t, objects, "StatefulSet", "metadatad-embedded")
	if r, _ := sts.get("spec", "replicas").(float64); r != 1 {
		t.Errorf("StatefulSet replicas %v, want 1: one process owns an embedded store", r)
	}
	claim, _ := sts.get("spec", "volumeClaimTemplates", 0, "metadata", "name").(string)
	for workload, c := range metadatadContainers(t, objects) {
		for _, probe := range []string{"readinessProbe", "startupProbe"} {
			raw := podSpec(find(t, objects, strings.Split(workload, "/")[0], strings.Split(workload, "/")[1])).get("containers", 0, probe, "grpc", "port")
			if raw == nil {
				t.Errorf("%s: %s is not a native gRPC probe", workload, probe)
			}
		}
		if workload == "StatefulSet/metadatad-embedded" {
			mounted := slices.ContainsFunc(c.VolumeMounts, func(m struct {
				Name      string
				MountPath string `json:"mountPath"`
			}) bool {
				return m.Name == claim && slices.Contains(c.Args, "-data-dir="+m.MountPath)
			})
			if claim == "" || !mounted {
				t.Errorf("the StatefulSet's -data-dir is not its claimed volume %q", claim)
			}
		}
	}
	cron := find(t, objects, "CronJob", "metadatad-purge")
	if p := cron.get("spec", "concurrencyPolicy"); p != "Forbid" {
		t.Errorf("CronJob concurrencyPolicy %v, want Forbid", p)
	}
	for _, o := range objects {
		spec := podSpec(o)
		if spec == nil {
			continue
		}
		if spec.get("securityContext", "runAsNonRoot") != true {
			t.Errorf("%s %s may run as root", o.kind(), o.name())
		}
		for i := range len(spec.get("volumes").([]any)) {
			if name, ok := spec.get("volumes", i, "secret", "secretName").(string); ok {
				find(t, objects, "Secret", name)
			}
		}
		for _, c := range containers(t, spec) {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secretValue(t, objects, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
	}
}

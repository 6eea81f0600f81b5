package deploy_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCronJobStartsAPurge starts metadatad with the StatefulSet's own
// arguments and Secrets (on loopback ports, with a test certificate for
// the TLS Secret), then runs the purge CronJob's grpcurl command as the
// kubelet would, its $(VAR)s and mounted files included: it must start a purge.
func TestCronJobStartsAPurge(t *testing.T) {
	objects := loadManifests(t)
	root := t.TempDir()
	tlsFiles := testCertificates(t)
	// mount makes the files a pod would see under a volume, in a directory of the test.
	mount := func(spec object, volume string) string {
		dir := filepath.Join(root, volume)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for i := range len(spec.get("volumes").([]any)) {
			if spec.get("volumes", i, "name") != volume {
				continue
			}
			secret, ok := spec.get("volumes", i, "secret", "secretName").(string)
			if !ok {
				return dir // a data volume
			}
			files := map[string]string{}
			if find(t, objects, "Secret", secret).get("type") == "kubernetes.io/tls" {
				files = tlsFiles
			} else {
				for key := range find(t, objects, "Secret", secret).get("stringData").(map[string]any) {
					files[key] = secretValue(t, objects, secret, key)
				}
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dir
	}
	// localPaths rewrites the args' mount paths to the test's directories.
	localPaths := func(spec object, c container, args []string) []string {
		out := slices.Clone(args)
		for _, m := range c.VolumeMounts {
			dir := mount(spec, m.Name)
			for i := range out {
				out[i] = strings.ReplaceAll(out[i], m.MountPath, dir)
			}
		}
		return out
	}

	sts := podSpec(find(t, objects, "StatefulSet", "metadatad-embedded"))
	server := containers(t, sts)[0]
	args := localPaths(sts, server, server.Args)
	for i, arg := range args {
		switch flagName(arg) {
		case "listen", "health-listen", "metrics-listen":
			args[i] = "-" + flagName(arg) + "=127.0.0.1:0"
		case "min-free-mib":
			args[i] = "-min-free-mib=0" // the test machine's disk is not the volume
		}
	}
	addr := startServer(t, args)

	cron := podSpec(find(t, objects, "CronJob", "metadatad-purge"))
	job := containers(t, cron)[0]
	env := map[string]string{}
	for _, e := range job.Env {
		switch {
		case e.Name == "METADATAD_ADDR":
			env[e.Name] = addr
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = secretValue(t, objects, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		default:
			env[e.Name] = e.Value
		}
	}
	if _, ok := env["METADATAD_ADDR"]; !ok {
		t.Fatal("the CronJob names the server in no METADATAD_ADDR")
	}
	grpcurlArgs := localPaths(cron, job, job.Args)
	for i := range grpcurlArgs {
		grpcurlArgs[i] = expand(grpcurlArgs[i], env)
		if strings.Contains(grpcurlArgs[i], "$(") {
			t.Fatalf("argument %q names a variable the CronJob does not set", job.Args[i])
		}
	}
	cmd := exec.Command(grpcurl, grpcurlArgs...)
	// The answer alone, on stdout.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the CronJob's grpcurl failed: %v\n%s%s", err, out, stderr.String())
	}
	var resp struct {
		Job struct {
			JobID string `json:"jobId"`
			State string `json:"state"`
		} `json:"job"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.Job.JobID == "" {
		t.Fatalf("StartPurge answered %s (%v), want a job", out, err)
	}
}

// startServer runs the binary with args and returns its gRPC address.
func startServer(t *testing.T, args []string) string {
	t.Helper()
	return startDaemon(t, args, nil)["serving"]
}

// startDaemon runs the binary with args and env (added to the test's), and
// returns the addresses its JSON log gave by the time it was serving gRPC,
// by message: "serving", "serving metrics", "serving health probes".
func startDaemon(t *testing.T, args, env []string) map[string]string {
	t.Helper()
	return launchDaemon(t, binary, "", args, env).addrs
}

// daemon is a metadatad the test started, serving.
type daemon struct {
	cmd    *exec.Cmd
	addrs  map[string]string
	exited chan struct{} // closed when its log ends: it exited
}

// launchDaemon starts program (a metadatad) in dir (the test's own when
// empty) and waits until it serves gRPC; the test's end kills it if stop
// has not.
func launchDaemon(t *testing.T, program, dir string, args, env []string) *daemon {
	t.Helper()
	cmd := exec.Command(program, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, addrs: map[string]string{}, exited: make(chan struct{})}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.exited
		_ = cmd.Wait()
	})
	lines := make(chan string, 64)
	go func() {
		defer close(d.exited)
		defer close(lines)
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			select {
			case lines <- scanner.Text():
			default:
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	var log []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("metadatad %v exited:\n%s", args, strings.Join(log, "\n"))
			}
			log = append(log, line)
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Addr != "" {
				d.addrs[entry.Msg] = entry.Addr
				if entry.Msg == "serving" {
					return d
				}
			}
		case <-deadline:
			t.Fatalf("metadatad not serving after 30s:\n%s", strings.Join(log, "\n"))
		}
	}
}

// stop shuts the daemon down as SIGTERM does and waits until it has
// exited, so that its data directory is free.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Error("metadatad did not exit within 30s of SIGTERM")
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	_ = d.cmd.Wait()
}

// testCertificates are the files of the TLS Secret: a CA and a serving
// certificate for the loopback address, in PEM.
func testCertificates(t *testing.T) map[string]string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "metadatad"},
		DNSNames: []string{"metadatad"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return map[string]string{
		"tls.crt": encode("CERTIFICATE", leafDER),
		"tls.key": encode("PRIVATE KEY", keyDER),
		"ca.crt":  encode("CERTIFICATE", caDER),
	}
}

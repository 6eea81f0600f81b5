package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/metadatad/metadatad/internal/testcerts"
)

// TestReadmeSecuredDeployment runs the examples of the README's Secured
// deployment section as written, in order: the token file the first one's
// here-document writes (which the later ones append to and read as
// /tokens/tokens.csv, as a mounted Secret), metadatad with each one's flags,
// and each grpcurl command, whose tokens or certificates must hold every
// scope the call needs, reflection's metadata.read included. Only
// addresses change: each server listens on a free loopback port with its
// store in a directory of the test, and the certificate files are made for
// the test, a client's with the example's SPIFFE id. The JWT example
// needs an identity provider: TestReadmeJWTExample plays one.
func TestReadmeSecuredDeployment(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)\n## Secured deployment\n(.*?)\n## ").FindSubmatch(readme)
	if section == nil {
		t.Fatal("the README has no Secured deployment section")
	}
	dir := t.TempDir()
	files := map[string]string{"/tokens/tokens.csv": filepath.Join(dir, "tokens.csv")}
	for name, content := range testCertificates(t) {
		files["/tls/"+name] = filepath.Join(dir, name)
		if err := os.WriteFile(files["/tls/"+name], []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files["ca.crt"] = files["/tls/ca.crt"]
	clients := testcerts.NewAuthority(t, "clients CA")
	cert, key := clients.Client(t, "purge-cronjob", "spiffe://fleet.example/ns/ops/sa/purge-cronjob")
	for name, content := range map[string][]byte{"/tls/clients-ca.crt": clients.PEM, "cronjob.crt": cert, "cronjob.key": key} {
		files[name] = filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(files[name], content, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(section[1], -1)
	ran := 0
	for _, block := range blocks {
		if strings.Contains(string(block[1]), "-auth-jwks-url") {
			continue
		}
		ran++
		t.Run(fmt.Sprint("example ", ran), func(t *testing.T) { runExample(t, string(block[1]), dir, files) })
	}
	if ran < 3 {
		t.Errorf("ran %d examples, want the static-token, TLS and mutual TLS ones", ran)
	}
}

// runExample runs one sh block of the README: here-documents into files,
// one metadatad, then each grpcurl against it.
func runExample(t *testing.T, block, dir string, files map[string]string) {
	var server []string
	var calls [][]string
	lines := commandLines(block)
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if heredoc := regexp.MustCompile(`^cat (>>?) (\S+) <<'(\w+)'$`).FindStringSubmatch(line); heredoc != nil {
			var body strings.Builder
			for i++; i < len(lines) && lines[i] != heredoc[3]; i++ {
				body.WriteString(lines[i] + "\n")
			}
			path, ok := files[heredoc[2]]
			if !ok {
				path = filepath.Join(dir, heredoc[2])
				files[heredoc[2]] = path
			}
			flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
			if heredoc[1] == ">>" {
				flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
			}
			f, err := os.OpenFile(path, flags, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString(body.String())
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		words := shellWords(t, line)
		for i, w := range words {
			if path, ok := files[w]; ok {
				words[i] = path
			}
		}
		switch {
		case len(words) == 0:
		case words[0] == "metadatad":
			server = words[1:]
		case words[0] == "grpcurl":
			calls = append(calls, words[1:])
		default:
			t.Fatalf("the example runs %q, which this test does not know", line)
		}
	}
	if server == nil || len(calls) == 0 {
		t.Fatal("the example starts no metadatad or runs no grpcurl")
	}
	for i, arg := range server {
		if flagName(arg) == "listen" {
			end := i + 2 // "-listen :50051"
			if strings.Contains(arg, "=") {
				end = i + 1
			}
			server = slices.Delete(server, i, end)
			break
		}
	}
	server = append(server, "-listen=127.0.0.1:0", "-data-dir="+filepath.Join(t.TempDir(), "data"), "-min-free-mib=0", "-log-format=json")
	addr := startServer(t, server)
	for _, args := range calls {
		for i, arg := range args {
			args[i] = strings.NewReplacer("localhost:50051", addr, "metadatad.example:50051", addr).Replace(arg)
		}
		out, err := exec.Command(grpcurl, args...).CombinedOutput()
		if err != nil {
			t.Errorf("grpcurl %q: %v\n%s", args, err, out)
		}
	}
}

// commandLines joins an sh block's continued lines (a "\" at a line's end,
// or a quote left open), so that each command is one line.
func commandLines(block string) []string {
	var lines []string
	var quote rune
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if quote != 0 {
			// sh goes on reading a quoted word past the end of the line.
			lines[len(lines)-1] += "\n" + line
		} else {
			lines = append(lines, line)
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") && quote == 0 {
			continue
		}
		prev := ' '
		for _, r := range line {
			if quote == 0 && r == '#' && (prev == ' ' || prev == '\t') {
				break // a comment runs to the end of the line, quotes and all
			}
			switch {
			case quote != 0 && r == quote:
				quote = 0
			case quote == 0 && (r == '\'' || r == '"'):
				quote = r
			}
			prev = r
		}
	}
	return lines
}

// shellWords splits a command line as sh does for the quoting the README
// uses: single and double quotes, nothing expanded.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var word strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			// A comment runs to the end of the line.
			return words
		case r == '$' || r == '`' || r == '\\':
			t.Fatalf("%q expands or escapes, which this test does not do", line)
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("%q: unterminated quote", line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// TestReadmeGRPCExamples runs every grpcurl command of the README's "The
// API with grpcurl" section as written, in order, against one plaintext
// metadatad; only localhost:50051 becomes the server's address. A call
// must succeed or fail with a status code named in the comment lines right
// before it, so a README edit that breaks an example fails here; a request
// grpcurl cannot send (bad JSON, an unknown method or field) fails too.
// The placeholders the README asks the reader to substitute are taken from
// earlier replies: JOB_ID from the last job id, ETAG from the last etag
// (the digits between W/" and " for device states), RESUME_TOKEN from the
// last resume token. The live feeds never end, so each Watch*ImageMetadata
// and WatchDeletedImages gets -max-time and may end DeadlineExceeded.
func TestReadmeGRPCExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)\n## The API with grpcurl\n(.*?)\n## ").FindSubmatch(readme)
	if section == nil {
		t.Fatal("the README has no API with grpcurl section")
	}
	// With the outbox, for WatchDeletedImages' examples.
	addr := startServer(t, []string{"-listen=127.0.0.1:0", "-data-dir=" + t.TempDir(), "-min-free-mib=0", "-log-format=json", "-retention-outbox"})
	// The pinned grpcurl, built once (TestMain): "go tool grpcurl" costs
	// half a second a call in checks, and the section has some 70 calls.
	codeName := regexp.MustCompile(`\b[A-Z]+(?:_[A-Z]+)*\b`)
	lastValue := map[string]*regexp.Regexp{
		"JOB_ID":       regexp.MustCompile(`"jobId": "([^"]+)"`),
		"ETAG":         regexp.MustCompile(`"etag": "((?:[^"\\]|\\.)*)"`),
		"RESUME_TOKEN": regexp.MustCompile(`"resumeToken": "([^"]+)"`),
	}
	placeholders := map[string]string{}
	calls := 0
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(section[1], -1) {
		var comment []string
		for _, line := range commandLines(string(block[1])) {
			line = strings.TrimSpace(line)
			switch {
			case line == "" || line == "alias grpcurl='go tool -modfile=tools.mod grpcurl'":
				comment = nil
				continue
			case strings.HasPrefix(line, "#"):
				comment = append(comment, line)
				continue
			}
			words := shellWords(t, line)
			if words[0] != "grpcurl" {
				t.Fatalf("the section runs %q, which this test does not know", line)
			}
			allowed := map[codes.Code]bool{}
			for _, name := range codeName.FindAllString(strings.Join(comment, " "), -1) {
				var code codes.Code
				if code.UnmarshalJSON([]byte(`"`+name+`"`)) == nil {
					allowed[code] = true
				}
			}
			var args []string
			for _, w := range words[1:] {
				w = strings.ReplaceAll(w, "localhost:50051", addr)
				w = strings.ReplaceAll(w, `W/\"ETAG\"`, `ETAG`)
				for name, value := range placeholders {
					w = strings.ReplaceAll(w, name, value)
				}
				args = append(args, w)
			}
			if regexp.MustCompile(`/Watch(\w*ImageMetadata|DeletedImages)$`).MatchString(words[len(words)-1]) {
				args = slices.Insert(args, 0, "-max-time=1")
				allowed[codes.DeadlineExceeded] = true
			}
			calls++
			out, err := exec.Command(grpcurl, args...).CombinedOutput()
			var exit *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &exit) && exit.ExitCode() > 64 && allowed[codes.Code(exit.ExitCode()-64)]:
			default:
				t.Errorf("grpcurl %q: %v\n%s", args, err, out)
			}
			for name, pattern := range lastValue {
				if m := pattern.FindAllSubmatch(out, -1); m != nil {
					placeholders[name] = string(m[len(m)-1][1])
				}
			}
			comment = nil
		}
	}
	if calls < 60 {
		t.Errorf("ran %d grpcurl calls; the section has more", calls)
	}
}

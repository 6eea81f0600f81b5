package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeStaticTokens runs the README's static-token example as
// written: the token file its here-document writes, metadatad with its
// flags, and each grpcurl command, whose tokens must hold every scope the
// call needs, reflection's metadata.read included. Only the addresses
// change: the server listens on a free loopback port, with its store in a
// directory of the test.
func TestReadmeStaticTokens(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\\*\\*Static tokens\\.\\*\\*.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no static-token example")
	}
	dir := t.TempDir()
	files := map[string]string{}
	var server []string
	var clients [][]string
	lines := strings.Split(strings.ReplaceAll(string(m[1]), "\\\n", " "), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if heredoc := regexp.MustCompile(`^cat > (\S+) <<'(\w+)'$`).FindStringSubmatch(line); heredoc != nil {
			var body []string
			for i++; i < len(lines) && lines[i] != heredoc[2]; i++ {
				body = append(body, lines[i])
			}
			path := filepath.Join(dir, heredoc[1])
			files[heredoc[1]] = path
			if err := os.WriteFile(path, []byte(strings.Join(body, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		words := shellWords(t, line)
		switch {
		case len(words) == 0:
		case words[0] == "metadatad":
			server = words[1:]
		case words[0] == "grpcurl":
			clients = append(clients, words[1:])
		default:
			t.Fatalf("the example runs %q, which this test does not know", line)
		}
	}
	if server == nil || len(clients) == 0 {
		t.Fatal("the example starts no metadatad or runs no grpcurl")
	}
	for i, arg := range server {
		if path, ok := files[arg]; ok {
			server[i] = path
		}
	}
	server = append(server, "-listen=127.0.0.1:0", "-data-dir="+filepath.Join(dir, "data"), "-min-free-mib=0", "-log-format=json")
	addr := startServer(t, server)
	for _, args := range clients {
		for i, arg := range args {
			args[i] = strings.ReplaceAll(arg, "localhost:50051", addr)
		}
		out, err := exec.Command("go", append([]string{"tool", "grpcurl"}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("grpcurl %q: %v\n%s", args, err, out)
		}
	}
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
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
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

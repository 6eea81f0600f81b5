package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// tokenTable is one version of a static token file: lines of
//
//	token,principal,scope scope ...
//
// in the spirit of Kubernetes' static token file. A line with an empty token
// grants its scopes to the client certificate whose identity is principal.
// Blank lines and lines starting with # are skipped.
type tokenTable struct {
	// byToken maps the SHA-256 of each token to its principal, so the
	// tokens themselves are not kept.
	byToken map[[sha256.Size]byte]Principal
	// certGrants maps a client certificate identity to its scopes.
	certGrants map[string][]string
}

// parseTokenFile reads a token file. Its errors name line numbers, never a
// line's content, which holds a secret.
func parseTokenFile(data []byte) (*tokenTable, error) {
	t := &tokenTable{byToken: map[[sha256.Size]byte]Principal{}, certGrants: map[string][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want token,principal,scopes, found %d fields", n, len(fields))
		}
		token, name, scopes := strings.TrimSpace(fields[0]), strings.TrimSpace(fields[1]), strings.Fields(fields[2])
		if name == "" {
			return nil, fmt.Errorf("line %d: no principal", n)
		}
		if len(scopes) == 0 {
			return nil, fmt.Errorf("line %d: principal %q has no scopes", n, name)
		}
		for _, s := range scopes {
			if !slices.Contains(Scopes, s) {
				return nil, fmt.Errorf("line %d: unknown scope %q (known: %s)", n, s, strings.Join(Scopes, " "))
			}
		}
		if token == "" {
			t.certGrants[name] = append(t.certGrants[name], scopes...)
			continue
		}
		sum := sha256.Sum256([]byte(token))
		if _, dup := t.byToken[sum]; dup {
			return nil, fmt.Errorf("line %d: token repeats an earlier line's", n)
		}
		t.byToken[sum] = newPrincipal(name, scopes)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.byToken) == 0 && len(t.certGrants) == 0 {
		return nil, errors.New("no tokens or grants")
	}
	return t, nil
}

// tokenFile holds the current version of a token file; reloads swap it.
type tokenFile struct{ table atomic.Pointer[tokenTable] }

func (f *tokenFile) load(data []byte) error {
	t, err := parseTokenFile(data)
	if err != nil {
		return err
	}
	f.table.Store(t)
	return nil
}

// lookup returns the principal of token.
func (f *tokenFile) lookup(token string) (Principal, bool) {
	p, ok := f.table.Load().byToken[sha256.Sum256([]byte(token))]
	return p, ok
}

// grants returns the scopes granted to a client certificate identity.
func (f *tokenFile) grants(identity string) []string {
	return f.table.Load().certGrants[identity]
}

// Package operator is where the operator credential lives on a developer's
// machine: `make run` writes the token of the platform it started there,
// and esimctl reads it, so the two work together with nothing to export.
package operator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TokenEnv holds the operator token itself; it wins over any file.
const TokenEnv = "ESIM_OPERATOR_TOKEN"

// TokenFileEnv names a file holding the operator token.
const TokenFileEnv = "ESIM_OPERATOR_TOKEN_FILE"

// DefaultTokenFile is $XDG_CONFIG_HOME/esim/operator-token, or
// ~/.config/esim/operator-token; "" when neither variable is set.
func DefaultTokenFile(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "esim", "operator-token")
}

// DefaultKeysDir is where `make run` keeps the keys of what outlives a
// start (services.yaml keys), beside the operator token: per machine, as
// the databases they open are, not per checkout. Empty without a home.
func DefaultKeysDir(getenv func(string) string) string {
	if f := DefaultTokenFile(getenv); f != "" {
		return filepath.Join(filepath.Dir(f), "keys")
	}
	return ""
}

// WriteToken stores token at path, readable by its owner only.
func WriteToken(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	// Written beside and renamed, so a reader never sees half a token.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	return nil
}

// ErrNoToken is ReadToken's answer when the file does not exist.
var ErrNoToken = errors.New("no operator token")

// ReadToken reads the token stored at path.
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNoToken
	}
	if err != nil {
		return "", fmt.Errorf("read operator token: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("operator token file %s is empty", path)
	}
	return token, nil
}

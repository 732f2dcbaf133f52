package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
)

// TestOperatorCredential: every call carries the operator token, from
// ESIM_OPERATOR_TOKEN or a file; esimctl says when there is none or the
// service refuses it, and a refused call changes nothing.
func TestOperatorCredential(t *testing.T) {
	accountsURL := startAccounts(t)
	home := t.TempDir()
	token := internalauthtest.Token(internalauth.Operator)
	file := operator.DefaultTokenFile(func(k string) string { return map[string]string{"HOME": home}[k] })

	// No token anywhere: a usage error naming where esimctl looked.
	noToken := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, "HOME": home, operator.TokenEnv: ""}
	esimctl(t, noToken, "accounts", "list").wantError(t, 2, "no operator credential", file, "make run", "ESIM_OPERATOR_TOKEN")

	// The default file, as `make run` writes it.
	if err := operator.WriteToken(file, token); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v %v, want 0600", st.Mode(), err)
	}
	esimctl(t, noToken, "accounts", "create", "--name", "From the file").ok(t)

	// --token-file and its variable name another file.
	other := filepath.Join(t.TempDir(), "token")
	esimctl(t, noToken, "--token-file", other, "accounts", "list").wantError(t, 2, "no operator credential", other)
	withFile := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, operator.TokenEnv: "", operator.TokenFileEnv: other}
	esimctl(t, withFile, "accounts", "list").wantError(t, 2, other)

	// A token the service does not accept (another platform's), from the
	// environment: refused, said so, and nothing created.
	wrong := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, operator.TokenEnv: internalauth.NewToken()}
	esimctl(t, wrong, "accounts", "create", "--name", "Intruder").wantError(t, 1, "create account", "refused the operator credential from ESIM_OPERATOR_TOKEN")
	var accts []account
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}, "accounts", "list", "--json").ok(t).data(t, &accts)
	if len(accts) != 1 || accts[0].Name != "From the file" {
		t.Fatalf("accounts after a refused create: %+v, want only the one created with the file's token", accts)
	}

	// A service's own token is not an operator's: the gateway may not
	// create accounts.
	gateway := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, operator.TokenEnv: internalauthtest.Token(internalauth.Gateway)}
	esimctl(t, gateway, "accounts", "list").wantError(t, 1, "list accounts", "does not let the credential from ESIM_OPERATOR_TOKEN do this")
}

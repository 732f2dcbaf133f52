package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

var migrations = fstest.MapFS{
	"00001_widgets.sql": {Data: []byte("-- +goose Up\nCREATE TABLE widgets (id int PRIMARY KEY);\n-- +goose Down\nDROP TABLE widgets;\n")},
}

func TestOpenCreatesMigratesAndIsRepeatable(t *testing.T) {
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test_created_" + hex.EncodeToString(b[:])
	u, _ := url.Parse(pgtest.AdminURL())
	u.Path = "/" + name
	t.Cleanup(func() {
		admin, err := postgres.Connect(ctx, pgtest.AdminURL())
		if err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			admin.Close()
		}
	})
	for i := range 2 {
		pool, err := postgres.Open(ctx, u.String(), true, migrations)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO widgets VALUES (1) ON CONFLICT DO NOTHING"); err != nil {
			t.Fatal(err)
		}
		pool.Close()
	}
}

func TestConnectNamesTheServerWithoutPassword(t *testing.T) {
	_, err := postgres.Connect(context.Background(), "postgres://u:secret@127.0.0.1:1/db?connect_timeout=1")
	if err == nil {
		t.Fatal("want an error")
	}
	if got := err.Error(); !strings.Contains(got, "127.0.0.1:1") || strings.Contains(got, "secret") {
		t.Fatalf("error %q should name the server and hide the password", got)
	}
}

package redisurl_test

import (
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/redisurl"
)

func TestParse(t *testing.T) {
	opts, err := redisurl.Parse("redis://:hunter2@cache:6380/3")
	if err != nil || opts.Addr != "cache:6380" || opts.DB != 3 || opts.Password != "hunter2" {
		t.Fatalf("Parse = %+v, %v", opts, err)
	}
	for _, bad := range []string{"http://:hunter2@cache:6379/0", "redis://:hunter2@cache:port/0", "redis://:hunter2@cache:6379/x"} {
		err := redisurl.Check(bad)
		if err == nil {
			t.Errorf("Check(%q) accepted it", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "want redis://") {
			t.Errorf("Check(%q) = %v: quotes the password or says nothing of the form", bad, err)
		}
	}
}

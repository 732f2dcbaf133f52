package accountsv1

import "testing"

func TestEnvironmentShortNames(t *testing.T) {
	if Environment_ENVIRONMENT_SANDBOX.ShortName() != "sandbox" || Environment_ENVIRONMENT_LIVE.ShortName() != "live" {
		t.Fatal("short names")
	}
	if e, ok := EnvironmentByShortName("live"); !ok || e != Environment_ENVIRONMENT_LIVE {
		t.Fatalf("live -> %v %v", e, ok)
	}
	for _, bad := range []string{"", "unspecified", "prod"} {
		if _, ok := EnvironmentByShortName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

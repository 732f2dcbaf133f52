package cataloguev1

import "testing"

func TestShortNames(t *testing.T) {
	for got, want := range map[string]string{
		PlanType_PLAN_TYPE_PER_DAY.ShortName():          "per_day",
		PlanType_PLAN_TYPE_FIXED.ShortName():            "fixed",
		CoverageScope_COVERAGE_SCOPE_GLOBAL.ShortName(): "global",
		PlanStatus_PLAN_STATUS_RETIRED.ShortName():      "retired",
		PlanType_PLAN_TYPE_UNSPECIFIED.ShortName():      "unspecified",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if pt, ok := PlanTypeByShortName("per_day"); !ok || pt != PlanType_PLAN_TYPE_PER_DAY {
		t.Errorf("per_day -> %v %v", pt, ok)
	}
	for _, bad := range []string{"", "unspecified", "bundle"} {
		if _, ok := PlanTypeByShortName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
		if _, ok := CoverageScopeByShortName(bad); ok {
			t.Errorf("scope %q parsed", bad)
		}
		if _, ok := PlanStatusByShortName(bad); ok {
			t.Errorf("status %q parsed", bad)
		}
	}
	if s, ok := CoverageScopeByShortName("region"); !ok || s != CoverageScope_COVERAGE_SCOPE_REGION {
		t.Errorf("region -> %v %v", s, ok)
	}
	if s, ok := PlanStatusByShortName("retired"); !ok || s != PlanStatus_PLAN_STATUS_RETIRED {
		t.Errorf("retired -> %v %v", s, ok)
	}
}

func TestKnownRefusesTheZeroValueAndNumbersNotInTheContract(t *testing.T) {
	for _, c := range []struct {
		name  string
		known bool
	}{
		{"fixed", PlanType_PLAN_TYPE_FIXED.Known()}, {"per_day", PlanType_PLAN_TYPE_PER_DAY.Known()},
		{"global", CoverageScope_COVERAGE_SCOPE_GLOBAL.Known()}, {"retired", PlanStatus_PLAN_STATUS_RETIRED.Known()},
	} {
		if !c.known {
			t.Errorf("%s is not Known", c.name)
		}
	}
	for name, known := range map[string]bool{
		"type 0": PlanType(0).Known(), "type 7": PlanType(7).Known(),
		"scope 0": CoverageScope(0).Known(), "scope 7": CoverageScope(7).Known(),
		"status 0": PlanStatus(0).Known(), "status -1": PlanStatus(-1).Known(),
	} {
		if known {
			t.Errorf("%s is Known", name)
		}
	}
}

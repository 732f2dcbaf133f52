package accountsv1

import "strings"

// ShortName is how the public API and esimctl spell an environment:
// "sandbox" or "live" ("unspecified" for the zero value). Hand-written; not
// generated.
func (e Environment) ShortName() string {
	return strings.ToLower(strings.TrimPrefix(e.String(), "ENVIRONMENT_"))
}

// EnvironmentByShortName parses "sandbox" or "live"; ok is false otherwise.
func EnvironmentByShortName(name string) (e Environment, ok bool) {
	v, ok := Environment_value["ENVIRONMENT_"+strings.ToUpper(name)]
	return Environment(v), ok && v != int32(Environment_ENVIRONMENT_UNSPECIFIED)
}

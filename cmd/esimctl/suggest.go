package main

import "strings"

// didYouMean suggests the candidates closest to a mistyped word, as
// "; did you mean "list"?", or "" when none is close: within two edits
// (letters swapped, missed or doubled), or one the word begins (three
// letters at least).
func didYouMean(typed string, candidates []string) string {
	if typed == "" {
		return ""
	}
	// One or two letters begin too many names to point at any.
	prefixOK := len(strings.TrimLeft(typed, "-")) >= 3
	var close []string
	for _, cand := range candidates {
		if editDistance(strings.ToLower(typed), strings.ToLower(cand)) <= 2 ||
			prefixOK && strings.HasPrefix(strings.ToLower(cand), strings.ToLower(typed)) {
			close = append(close, `"`+cand+`"`)
		}
	}
	if len(close) == 0 {
		return ""
	}
	return "; did you mean " + orList(close) + "?"
}

// editDistance is the Levenshtein distance of a and b, by rune.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

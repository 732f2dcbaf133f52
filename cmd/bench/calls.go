package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// getPlansRoute is the catalogue's Twirp route for plan lookups, as its
// request metrics name it.
const getPlansRoute = `http_route="/twirp/esim.catalogue.v1.Catalogue/GetPlans"`

// countGetPlansCalls reads from the catalogue's /metrics how many GetPlans
// calls it has served so far, whatever their outcome.
func countGetPlansCalls(ctx context.Context, catalogueURL string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, catalogueURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read catalogue metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read catalogue metrics: %s", resp.Status)
	}
	var total float64
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "http_server_request_duration_seconds_count{") || !strings.Contains(line, getPlansRoute) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("catalogue metrics: %q: %w", line, err)
		}
		total += v
	}
	if err := lines.Err(); err != nil {
		return 0, fmt.Errorf("read catalogue metrics: %w", err)
	}
	return total, nil
}

package views

import (
	"encoding/json"
	"fmt"
)

func csrfHeader(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

func creditsText(n int32) string {
	if n == 1 {
		return "1 credit"
	}
	return fmt.Sprintf("%d credits", n)
}

func invalidClass(errs map[string]string, name string) string {
	if _, ok := errs[name]; ok {
		return "invalid"
	}
	return ""
}

func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

func pauseKindText(k string) string {
	if k == "filesystem" {
		return "Files only (the dev server restarts on resume)"
	}
	return "Memory snapshot"
}

func keyVals(key string) string {
	b, _ := json.Marshal(map[string]string{"idempotencyKey": key})
	return string(b)
}

package applog_test

import (
	"testing"

	"sandman/applog"
)

// Every secret of MinSecretLen bytes or more is replaced by its name wherever it appears, the
// longest first when one holds another; shorter values and other text are left as they are.
func TestARedactorReplacesEverySecretOfSixBytesOrMore(t *testing.T) {
	t.Parallel()
	r := applog.NewRedactor(map[string]string{"KEY": "sk-abcdef", "LONG_KEY": "sk-abcdef-123", "SHORT": "12345", "DB": "postgres://u:p@h/db"})
	for _, tt := range []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"key sk-abcdef!", "key [secret KEY]!"},
		{"sk-abcdef-123 and sk-abcdef", "[secret LONG_KEY] and [secret KEY]"},
		{"sk-abcdesk-abcdef", "sk-abcde[secret KEY]"},
		{"12345 stays", "12345 stays"},
		{"url=postgres://u:p@h/db", "url=[secret DB]"},
		{"sk-abcdefsk-abcdef", "[secret KEY][secret KEY]"},
		{"s", "s"},
		{"", ""},
	} {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if applog.NewRedactor(map[string]string{"SHORT": "12345"}) != nil {
		t.Error("a Redactor of no secret long enough")
	}
}

package labs

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/userr"
)

// LangFromEnv picks the language from the locale (LC_ALL, LC_MESSAGES,
// LANG, in that order, as gettext does): "ru" for a Russian locale, else
// "en".
func LangFromEnv(getenv func(string) string) string {
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := getenv(k); v != "" {
			if strings.HasPrefix(strings.ToLower(v), "ru") {
				return "ru"
			}
			return "en"
		}
	}
	return "en"
}

// ResolveLang resolves a --lang flag ("" is the locale's language; EN and
// en alike), with a usage error for a language labs are not written in.
func ResolveLang(flag string, getenv func(string) string) (string, error) {
	if flag == "" {
		if getenv == nil {
			getenv = os.Getenv
		}
		return LangFromEnv(getenv), nil
	}
	if l := strings.ToLower(flag); slices.Contains(Langs, l) {
		return l, nil
	}
	return "", userr.Usage(fmt.Sprintf("unknown language %q", flag), "use --lang "+strings.Join(Langs, " or --lang "))
}

// Langs are the languages labs are written in.
var Langs = []string{"en", "ru"}

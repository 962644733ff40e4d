// report.html's words in each language it is written in.

package report

import (
	_ "embed"
)

// htmlWords are the fixed words of the class report.
var htmlWords = map[string]map[string]string{
	"en": {
		"classReport": "class report", "credit": "Credit", "limits": "Limits", "ran": "Graded",
		"students": "students", "median": "median", "mean": "mean", "min": "min", "max": "max", "q1": "Q1", "q3": "Q3", "fullMarks": "full marks",
		"class": "Class", "tasks": "Tasks", "distribution": "Distribution of totals", "feedback": "Feedback",
		"problems": "Did not run to the end", "problemsCard": "not graded by labctl: re-run",
		"failedRuns":   "The submission's fault: it does not build, deploy or finish in time. Scored: the tasks it did not reach earn nothing.",
		"unjudgedRuns": "labctl's or the machine's fault: not scored and not counted. Re-run labctl grade for these submissions.",
		"student":      "Student", "total": "Total", "outcome": "Outcome", "hidden": "hidden", "passed": "Passed",
		"commonCheck": "Most common failing check", "reason": "Its most common reason", "message": "First error line",
		"noFailures": "every scored submission passed", "noCheck": "no check ran (build or deploy failed)",
		"shareOf":      "of %d scored submissions",
		"nothingWrong": "Every submission was graded.", "toTable": "class table", "source": "source", "commit": "commit",
		"students1": "student(s)", "times": "×", "count": "submissions",
		"unknown": "unknown", "noRun": "not recorded (graded by an older labctl)",
		"creditTasks":  "tasks: a task earns its points when every check of it that ran passed; skipped checks neither earn nor cost points",
		"creditChecks": "checks: a task earns its points times the share of its checks that ran and passed (skipped ones do not count), nothing when a gate check failed",
		"wallTime":     "wall time %s per submission", "cpu": "manager CPU time %s", "memory": "manager memory %d MiB", "jobs": "%d at a time",
		"noLimits": "no CPU or memory limits", "between": "%s to %s", "started": "last run started %s",
		"noScript": "Click a column's heading to sort by it, a cell to read why it lost points.",
		"filter":   "Filter the class", "filterHint": "name, outcome or task: 4.2, build failed", "details": "details",
		"oc-graded": "graded", "oc-build-failed": "build failed", "oc-deploy-failed": "deploy failed", "oc-timeout": "timed out", "oc-error": "not graded",
	},
	"ru": {
		"classReport": "отчёт по группе", "credit": "Оценивание", "limits": "Ограничения", "ran": "Проверено",
		"students": "студентов", "median": "медиана", "mean": "среднее", "min": "мин.", "max": "макс.", "q1": "Q1", "q3": "Q3", "fullMarks": "полный балл",
		"class": "Группа", "tasks": "Задачи", "distribution": "Распределение баллов", "feedback": "Отзывы",
		"problems": "Не дошли до конца", "problemsCard": "не проверено labctl: перезапустить",
		"failedRuns":   "По вине решения: не собирается, не устанавливается или не уложилось во время. Оценено: недостигнутые задачи баллов не приносят.",
		"unjudgedRuns": "По вине labctl или машины: не оценено и не учитывается. Запустите labctl grade для этих решений ещё раз.",
		"student":      "Студент", "total": "Итого", "outcome": "Итог проверки", "hidden": "скрыта", "passed": "Прошли",
		"commonCheck": "Чаще всего не проходит", "reason": "Чаще всего потому, что", "message": "Первая строка ошибки",
		"noFailures": "все оценённые решения прошли", "noCheck": "проверки не запускались (сборка или установка не удалась)",
		"shareOf":      "из %d оценённых решений",
		"nothingWrong": "Все решения проверены.", "toTable": "к таблице", "source": "источник", "commit": "коммит",
		"students1": "студ.", "times": "×", "count": "решений",
		"unknown": "неизвестно", "noRun": "не записаны (проверено старой версией labctl)",
		"creditTasks":  "по задачам: задача приносит баллы, когда пройдены все её проверки, которые удалось запустить; пропущенные проверки баллов не дают и не отнимают",
		"creditChecks": "по проверкам: баллы задачи умножаются на долю пройденных среди запущенных проверок (пропущенные не учитываются); ноль, если не пройдена ключевая проверка",
		"wallTime":     "время %s на решение", "cpu": "процессорное время менеджера %s", "memory": "память менеджера %d МиБ", "jobs": "по %d одновременно",
		"noLimits": "без ограничений CPU и памяти", "between": "с %s по %s", "started": "последний запуск %s",
		"noScript": "Щёлкните заголовок столбца, чтобы отсортировать по нему, ячейку — чтобы узнать, за что сняты баллы.",
		"filter":   "Фильтр группы", "filterHint": "имя, итог или задача: 4.2, не собирается", "details": "подробности",
		"oc-graded": "проверено", "oc-build-failed": "не собирается", "oc-deploy-failed": "не устанавливается", "oc-timeout": "превышено время", "oc-error": "не проверено",
	},
}

// htmlWordsIn returns the report's words in a language, English for any
// word (or language) without a translation.
// The feedback's own words (expected, observed, hint, ...) are the
// feedback file's.
func htmlWordsIn(lang string) map[string]string {
	out := map[string]string{}
	for k := range feedbackWords["en"] {
		out[k] = fbWord(lang, k)
	}
	// The feedback's section titles; "passed" is a column here.
	out["whatPassed"], out["whatFailed"] = out["passed"], out["failed"]
	for _, l := range []string{"en", lang} {
		for k, v := range htmlWords[l] {
			out[k] = v
		}
	}
	return out
}

# What each failed test printed, read from ctest's Testing/Temporary/LastTest.log, short enough
# to sit at the end of a CI log: CI keeps only a log's tail, and ctest prints a failure's output
# where the test ran, thousands of lines before it.
# Per failed test: its name, GoogleTest's first failure messages (each "file:line: Failure"
# with the lines after it) and the output's last lines, which say where a test that crashed or
# ran out of time was.
#   awk -f scripts/failure-digest.awk build/Testing/Temporary/LastTest.log
BEGIN {
  lines_after_failure = 8
  failures_shown = 4
  tail_lines = 8
}

/^[0-9]+\/[0-9]+ Test: / {
  name = $3
  in_output = 0
  output_lines = 0
  failure_text = ""
  failures = 0
  lines_to_keep = 0
  passed = 0
  next
}
/^Output:$/ { in_output = 1; getline; next }  # the next line is a rule of dashes
/^<end of output>$/ { in_output = 0; next }
in_output {
  output[output_lines++ % tail_lines] = $0
  if ($0 ~ /: Failure$/ && ++failures <= failures_shown) lines_to_keep = lines_after_failure + 1
  if (lines_to_keep > 0) {
    failure_text = failure_text "    " $0 "\n"
    --lines_to_keep
  }
  next
}
/^Test Passed\.$/ { passed = 1; next }
/ end time: / && name != "" {
  if (!passed) {
    printf "--- %s failed\n", name
    if (failure_text != "") printf "  GoogleTest's failures (%d in all):\n%s", failures, failure_text
    printf "  its last lines:\n"
    first = output_lines > tail_lines ? output_lines - tail_lines : 0
    for (i = first; i < output_lines; ++i) printf "    %s\n", output[i % tail_lines]
  }
  name = ""
}

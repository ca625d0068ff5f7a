# The man page, made from sluice's own help so that it never disagrees with
# the program: help2man reads `sluice --help` and `--version` for the name,
# synopsis and options; each command's `sluice COMMAND --help` becomes a
# section of its own; sluice.h2m beside this file adds what no --help says
# (files, the service, exit status, see also).
#   cmake -DSLUICE=path/to/sluice -DHELP2MAN=help2man -DOUT=sluice.1 -P make_man_page.cmake
file(READ ${CMAKE_CURRENT_LIST_DIR}/sluice.h2m text)
foreach(cmd check plan run ctl elements)
  execute_process(COMMAND ${SLUICE} ${cmd} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sluice ${cmd} --help failed (${rc})")
  endif()
  # roff: a backslash is \e; a line that starts with . or ' would be a request
  string(REPLACE "\\" "\\e" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  string(APPEND text "[COMMAND ${cmd}]\n.nf\n${help}.fi\n\n")
endforeach()
file(WRITE ${OUT}.h2m "${text}")
execute_process(COMMAND ${HELP2MAN} --no-info --section 1 --source "Sluice"
                        --name "declarative packet-pipeline engine and flow probe on DPDK"
                        --include ${OUT}.h2m --output ${OUT} ${SLUICE}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc})")
endif()

# Run after a test binary is built (trainit_gtest() in tests/CMakeLists.txt,
# with TRAINIT_TESTS_PER_SUITE): writes OUT, a ctest file with one test per
# gtest suite of BINARY, named "Suite.*" (NAME_SUFFIX after it), which runs
# that suite's cases that FILTER selects in one process, under EMULATOR if
# one is set. Its cases are listed by name, so a filter that selects some
# cases of a suite (*Killed*) keeps exactly those.
#   cmake -DBINARY= -DOUT= -DWORKDIR= -DLABEL= [-DFILTER=] [-DSERIAL=ON]
#         [-DNAME_SUFFIX=] [-DEMULATOR=] -P gtest_suites.cmake
set(filter_arg "")
if(FILTER)
  set(filter_arg "--gtest_filter=${FILTER}")
endif()
execute_process(COMMAND ${EMULATOR} ${BINARY} --gtest_list_tests ${filter_arg}
                WORKING_DIRECTORY ${WORKDIR} TIMEOUT 60
                RESULT_VARIABLE rc OUTPUT_VARIABLE listing ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests ${filter_arg}: ${rc}\n${err}")
endif()

# "Suite." then "  Case" lines; a value-parameterized case or typed suite
# has a "  # GetParam() = ..." comment after it.
string(REPLACE ";" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
set(suite "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE " +#.*" "" line "${line}")
  if(line MATCHES "^([^ ].*)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    set("cases_${suite}" "")
  elseif(suite AND line MATCHES "^  ([^ ]+)$")
    list(APPEND "cases_${suite}" "${suite}.${CMAKE_MATCH_1}")
  endif()
endforeach()

set(serial "")
if(SERIAL)
  set(serial " RUN_SERIAL TRUE")
endif()
set(emulator "")
foreach(word IN LISTS EMULATOR)
  string(APPEND emulator " [==[${word}]==]")
endforeach()
set(content "")
foreach(suite IN LISTS suites)
  string(REPLACE ";" ":" cases "${cases_${suite}}")
  set(name "${suite}.*${NAME_SUFFIX}")
  string(APPEND content "add_test([=[${name}]=]${emulator} [==[${BINARY}]==] [==[--gtest_filter=${cases}]==])\n"
         "set_tests_properties([=[${name}]=] PROPERTIES WORKING_DIRECTORY [==[${WORKDIR}]==] LABELS ${LABEL}${serial})\n")
endforeach()
file(WRITE "${OUT}" "${content}")

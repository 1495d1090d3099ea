# The version a build and its package carry: PROJECT_VERSION+git<commits>.g<sha>.
# The commit count comes first so that dpkg --compare-versions orders two builds
# of the same branch by history (a short SHA alone does not sort); the SHA says
# which commit a binary was built from. Outside a git checkout (a source tarball)
# the version is PROJECT_VERSION alone.
#
# Sets SHARDSCOPE_GIT_SHA (or "" without git), SHARDSCOPE_GIT_COUNT,
# SHARDSCOPE_GIT_DATE (the commit's date, YYYY-MM-DD, for reproducible man pages
# and changelog; the configure date without git) and SHARDSCOPE_PACKAGE_VERSION.
find_package(Git QUIET)
set(SHARDSCOPE_GIT_SHA "")
set(SHARDSCOPE_GIT_COUNT "")
string(TIMESTAMP SHARDSCOPE_GIT_DATE "%Y-%m-%d" UTC)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} log -1 --format=%h%n%cs
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE head_result)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-list --count HEAD
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE count OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE count_result)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE git_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(head_result EQUAL 0 AND count_result EQUAL 0 AND head)
    string(REPLACE "\n" ";" head "${head}")
    list(GET head 0 SHARDSCOPE_GIT_SHA)
    list(GET head 1 SHARDSCOPE_GIT_DATE)
    set(SHARDSCOPE_GIT_COUNT ${count})
    # A shallow clone counts only the commits it holds: the version would sort wrongly.
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --is-shallow-repository
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE shallow OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(shallow STREQUAL "true")
      message(WARNING "shallow git clone: the commit count ${count} in the version does not sort; "
                      "fetch the history (git fetch --unshallow) before building packages")
    endif()
  endif()
  # A new commit (or checkout) reconfigures, so that --version never names a stale commit.
  # Only BuildInfo.h changes then, which two main() files include.
  if(git_dir AND EXISTS "${git_dir}/logs/HEAD")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${git_dir}/logs/HEAD")
  endif()
endif()
if(SHARDSCOPE_GIT_SHA)
  set(SHARDSCOPE_PACKAGE_VERSION "${PROJECT_VERSION}+git${SHARDSCOPE_GIT_COUNT}.g${SHARDSCOPE_GIT_SHA}")
else()
  set(SHARDSCOPE_PACKAGE_VERSION "${PROJECT_VERSION}")
endif()

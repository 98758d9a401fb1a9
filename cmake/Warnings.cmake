# Warnings as errors for every target of the project (FAULTLINE_WERROR: off by default, on in CI).
function(faultline_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
                                           -Wcast-align -Wunused -Wformat=2)
  if(FAULTLINE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

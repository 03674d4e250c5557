# Shared warning flags for every Tessera target (kept clean; -Werror with TESSERA_WERROR=ON).
function(tessera_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wcast-align -Wunused -Woverloaded-virtual
                                           -Wimplicit-fallthrough)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

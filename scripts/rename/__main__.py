from .project_name import main

main()
